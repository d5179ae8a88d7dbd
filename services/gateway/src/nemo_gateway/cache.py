"""The exact result cache.

A key is every input that can change a result: the prompt's id and version, the model, the
request parameters, the output schema, a digest of the exact rendered prompt (the learner
context, sources and variables it holds) and the caller's permission scope. The scope is part of
the key, not a filter applied afterwards, so two scopes can never read each other's entry even
when everything else matches. Only model results are cached (a fallback is cheap to rebuild and
may be transient), never streamed chat.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

from cachetools import TTLCache

from nemo_gateway.providers.base import Message


@dataclass(frozen=True, slots=True)
class CacheKey:
    """Everything a cached result depends on."""

    prompt_ref: str
    model: str
    parameters: str
    schema_sha256: str
    context_sha256: str
    scope: str


@dataclass(frozen=True, slots=True)
class CachedRun:
    """A model result as it was produced."""

    output: Any
    path: str
    reason: str
    request_sha256: str
    response_model: str


def digest(value: Any) -> str:
    """SHA-256 of a JSON-serialisable value in canonical form."""
    raw = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(raw.encode()).hexdigest()


def messages_digest(messages: tuple[Message, ...]) -> str:
    return digest([[m.role, m.content] for m in messages])


class ResultCache:
    """Bounded in size and in age; ``max_entries`` 0 turns it off."""

    def __init__(self, max_entries: int, ttl_seconds: float) -> None:
        self._entries: TTLCache[CacheKey, CachedRun] | None = (
            TTLCache(maxsize=max_entries, ttl=ttl_seconds, timer=time.monotonic)
            if max_entries > 0
            else None
        )

    @property
    def enabled(self) -> bool:
        return self._entries is not None

    def get(self, key: CacheKey) -> CachedRun | None:
        return None if self._entries is None else self._entries.get(key)

    def put(self, key: CacheKey, run: CachedRun) -> None:
        if self._entries is not None:
            self._entries[key] = run

    def __len__(self) -> int:
        return 0 if self._entries is None else len(self._entries)
