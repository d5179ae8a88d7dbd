"""Call limits: how many tool calls per agent, per user and per tool, across every replica.

A limit is a line of data (:class:`CallLimit`): the tools it applies to (names and globs, as in
grants), what it counts per (``agent``, ``user``, ``tool``, or any combination; none: one bucket
for every call to those tools) and its token bucket (a rate and a burst). The settings give
three kinds (see :mod:`nemo_toolplane.settings`): per agent on every tool, per agent and user on
every tool, and the list of tool limits. A call takes a token from the bucket of every limit
that applies to it, or from none when one is empty (one statement, :mod:`.shared`), so
a user refused by their own limit spends nothing of the agent's, and one user cannot exhaust an
agent for its other users. A limit ``per`` user does not apply to a call made for nobody.

When the shared store does not answer in time, a call of a tool that writes is refused
(``DEPENDENCY_ERROR``, retryable: nothing ran); every other call is limited by this replica's
own buckets at the same rates, so during such an outage the limits hold per replica (an agent
may then reach replicas times its rate). Each such decision is counted
(``nemo.toolplane.limits.store_unavailable``) and logged.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from opentelemetry import metrics
from pydantic import BaseModel, ConfigDict, Field

from nemo_toolplane.limits.local import KeyedRateLimiter
from nemo_toolplane.limits.shared import Bucket, BucketsUnavailable, SharedBuckets, bucket_key
from nemo_toolplane.patterns import matches_pattern
from nemo_toolplane.principal import Principal

logger = logging.getLogger(__name__)

Dimension = Literal["agent", "user", "tool"]

store_unavailable = metrics.get_meter(__name__).create_counter(
    "nemo.toolplane.limits.store_unavailable",
    unit="{decision}",
    description="Limit decisions the shared store did not answer in time, by limiter: calls "
    "of tools that write were refused, others limited by the replica's own buckets.",
)


class CallLimit(BaseModel):
    """One limit: ``per_second`` calls (``burst`` at once) to ``tools``, counted per ``per``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tools: str = Field("*", min_length=1, description="Tool names and globs, comma-separated.")
    per: tuple[Dimension, ...] = Field(
        description="What the limit counts per: agent, user, tool; empty for all calls at once."
    )
    per_second: float = Field(gt=0)
    burst: int = Field(ge=1)

    @property
    def name(self) -> str:
        """How audit rows and errors name the limit ("agent+user on *")."""
        return f"{'+'.join(self.per) or 'all'} on {self.tools}"

    def applies_to(self, tool_name: str) -> bool:
        return matches_pattern(self.tools, tool_name)


#: Tools that write, per agent: approvals and policies decide whether they run, this how often.
DEFAULT_TOOL_CALL_LIMITS = (
    CallLimit(
        tools="application.set_status,learner.update_profile",
        per=("agent",),
        per_second=1.0,
        burst=10,
    ),
)


def describe(limit: CallLimit) -> str:
    """The refusal in words, for the agent."""
    parts = {
        "agent": "from this agent",
        "user": "for this user",
        "tool": "to this tool",
    }
    scope = " ".join(parts[dimension] for dimension in limit.per) or "to these tools overall"
    return f"too many calls {scope}; slow down"


@dataclass(frozen=True)
class Admission:
    """Whether a call may go on, and if not, why."""

    admitted: bool
    retry_after: float = 0.0
    #: The limit that refused the call.
    limit: CallLimit | None = None
    #: The shared store did not answer: the call writes and was refused.
    unavailable: bool = False
    #: Decided by this replica's own buckets (the shared store did not answer).
    local: bool = False


class CallLimiter:
    """Applies :class:`CallLimit` lines to calls, on the shared buckets."""

    def __init__(self, limits: Sequence[CallLimit], shared: SharedBuckets) -> None:
        names = [limit.name for limit in limits]
        if len(set(names)) != len(names):
            # Their buckets would be one: a limit is known by its tools and what it counts per.
            raise ValueError("two call limits count the same tools per the same things")
        self._limits = tuple(limits)
        self._shared = shared
        self._local = {limit: KeyedRateLimiter(limit.per_second, limit.burst) for limit in limits}

    @property
    def limits(self) -> tuple[CallLimit, ...]:
        return self._limits

    def buckets(self, principal: Principal, tool_name: str) -> list[tuple[CallLimit, Bucket]]:
        """The bucket of every limit that applies to a call of ``tool_name`` ("" for a name
        that resolves to no tool: only limits on every tool count it)."""
        values: dict[Dimension, str | None] = {
            "agent": principal.agent_id,
            "user": principal.user_id,
            "tool": tool_name,
        }
        found = []
        for limit in self._limits:
            if not limit.applies_to(tool_name):
                continue
            parts = [values[dimension] for dimension in limit.per]
            if any(part is None for part in parts):
                continue
            key = bucket_key(limit.name, *(part for part in parts if part is not None))
            found.append((limit, Bucket(key, limit.per_second, limit.burst)))
        return found

    async def admit(self, principal: Principal, tool_name: str, *, writes: bool) -> Admission:
        """Take a token for the call from every applicable limit, or refuse it."""
        pairs = self.buckets(principal, tool_name)
        if not pairs:
            return Admission(True)
        try:
            taken = await self._shared.take([bucket for _, bucket in pairs])
        except BucketsUnavailable as error:
            store_unavailable.add(1, {"nemo.limiter": "calls"})
            logger.warning(
                "call limits store unavailable",
                extra={"error": str(error), "refused": writes, "agent_id": principal.agent_id},
            )
            if writes:
                return Admission(False, unavailable=True)
            return self._admit_locally(pairs)
        if taken.admitted:
            return Admission(True)
        limit = next((limit for limit, bucket in pairs if bucket.key == taken.refused), None)
        return Admission(False, taken.wait, limit)

    def _admit_locally(self, pairs: Sequence[tuple[CallLimit, Bucket]]) -> Admission:
        """All or nothing on this replica's buckets, as the shared store would decide."""
        for limit, bucket in pairs:
            local = self._local[limit]
            if local.exhausted(bucket.key):
                return Admission(False, local.retry_after(bucket.key), limit, local=True)
        for limit, bucket in pairs:
            self._local[limit].acquire(bucket.key)
        return Admission(True, local=True)
