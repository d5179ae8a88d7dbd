"""The exact result cache.

A key is every input that can change a result: the prompt's id and version, the model, the
request parameters, the output schema, a digest of the exact rendered prompt, a digest of the
whole prompt input (:func:`input_digest`: every variable, the language, the learner bundle's
typed fields, every field of the numbered sources) and the caller's permission scope. The
rendered prompt alone is not enough: the server-authoritative fields a result gets after the
model answers come from inputs the prompt does not print (the node id of generated items, the
focus node of a hint whose title another node shares). The scope is part of
the key, not a filter applied afterwards, so two scopes can never read each other's entry even
when everything else matches. Only model results are cached (a fallback is cheap to rebuild and
may be transient), never streamed chat.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

from cachetools import TTLCache
from google.protobuf.message import Message as ProtoMessage

from nemo_gateway.prompts.spec import PromptInput
from nemo_gateway.providers.base import Message


@dataclass(frozen=True, slots=True)
class CacheKey:
    """Everything a cached result depends on."""

    prompt_ref: str
    model: str
    parameters: str
    schema_sha256: str
    context_sha256: str
    input_sha256: str
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


# What a build or a snapshot adds to a bundle and no result may depend on.
_PER_BUILD = ("build_time", "input_ref", "snapshot_sha256")


def _bundle_digest(bundle: ProtoMessage | None) -> str:
    if bundle is None:
        return ""
    copy = type(bundle)()
    copy.CopyFrom(bundle)
    for name in _PER_BUILD:
        if name in copy.DESCRIPTOR.fields_by_name:
            copy.ClearField(name)
    return hashlib.sha256(copy.SerializeToString(deterministic=True)).hexdigest()


def input_digest(prompt: PromptInput[Any]) -> str:
    """SHA-256 of everything in ``prompt`` a result may depend on. The evaluation time is left
    out: no renderer, finisher or baseline reads it (a test holds them to that), so requests that
    differ only in it share an entry."""
    return digest(
        {
            "variables": prompt.variables.model_dump(mode="json"),
            "lang": prompt.lang.value,
            "context": _bundle_digest(prompt.context),
            "conversation": _bundle_digest(prompt.conversation),
            "sources": [dataclasses.asdict(source) for source in prompt.sources],
        }
    )


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
