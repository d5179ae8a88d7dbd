"""Approvals: a person lets one exact call run once.

A call that needs approval creates a request bound to everything that made it: agent, token,
user and where that user came from, tool id and version, a digest of the canonical arguments and
the version of the policy that required it, with a time to decide and an expiry. Requests are
rate limited per agent and credential (a token bucket shared by every replica,
:mod:`nemo_toolplane.limits.shared`), never per the user an agent names, so an agent cannot
flood operators by changing that name. The request also keeps the arguments themselves
and the resource, because an operator must see what the call would change before approving it.
A person approves or rejects it (an operator, or a guardian of the learner where the policy
names guardians), never one of its parties: the user the call was made for, whatever its source,
and the operator who issued the call's token, the one person known to hold it, all compared
canonically (:func:`nemo_core.people.canonical_id`). The same call repeated with the same
arguments before the expiry then runs exactly once. A request nobody decided by its deadline is
denied, as a rejected one is: the call does not run, and a repeat files a new request.
Changed arguments, another token, agent or user, a changed policy, or an expired approval need a
new one. There is no path that lets a call through without an approver.

"Exactly once" is a transaction: the approval is consumed in the same database transaction as
the tool's own write (the executor writes through :meth:`ToolCall.transaction`), so a call that
fails, times out or is cancelled leaves both the data and the approval as they were, and the
agent can repeat it. A repeat that arrives while an earlier attempt still holds the approval
(one cut short whose transaction has not rolled back yet) waits for it, up to a bound: it then
runs under the approval if the earlier attempt let go of it, needs a new approval if that attempt
used it, and is told to retry (:class:`ApprovalBusy`) if it is still running; it never files a
second request for a call that is already approved. A write tool whose effect lies outside this
database could not join that transaction and would have to make its effect idempotent by approval
id; there is none yet.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Generic, TypeVar

import asyncpg

from nemo_core.db import Connection, Pool
from nemo_core.deadlines import downstream_timeout
from nemo_core.errors import ServiceError
from nemo_core.page_tokens import decode_page_token, encode_page_token
from nemo_core.people import canonical_id
from nemo_toolplane.audit.log import CallStatus
from nemo_toolplane.envelope import ErrorCode, ToolError
from nemo_toolplane.limits.shared import Bucket, SharedBuckets, bucket_key
from nemo_toolplane.policy import Policy
from nemo_toolplane.principal import Principal

T = TypeVar("T")


class ApprovalStatus(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    CONSUMED = "consumed"
    EXPIRED = "expired"
    DENIED = "denied"
    """Nobody decided before the deadline: it stays unapproved, as a rejected one does."""


#: Who may decide the approvals of a policy, as ``toolplane.policies.approvers`` writes it;
#: approvals no policy lifts (CRITICAL tools) are for operators.
OPERATOR = "operator"
GUARDIAN = "guardian"


class ApprovalError(Exception):
    """An operator's request on approvals cannot be carried out."""


class ApprovalNotFound(ApprovalError):
    pass


class ApprovalNotPending(ApprovalError):
    """Only a pending, unexpired approval can be decided."""

    def __init__(self, approval_id: str, status: ApprovalStatus) -> None:
        super().__init__(f"approval {approval_id} is {status}, not pending")
        self.status = status


def canonical_arguments(arguments: Mapping[str, Any]) -> str:
    """The canonical JSON of validated arguments: sorted keys, no spaces, text as is."""
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def arguments_digest(arguments: Mapping[str, Any]) -> str:
    """SHA-256 of :func:`canonical_arguments`, in lower-case hex."""
    return _sha256(canonical_arguments(arguments))


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class SelfApproval(ApprovalError):
    """The person deciding is a party to the call: its user, or its token's issuer."""

    def __init__(self, approval_id: str) -> None:
        super().__init__(
            f"approval {approval_id} is for a call made on your own behalf, or with a token you "
            "issued; another person must decide it"
        )


class NotAnApprover(ApprovalError):
    """The policy that required the approval names no approver the person is."""

    def __init__(self, approval_id: str, approvers: tuple[str, ...]) -> None:
        super().__init__(
            f"approval {approval_id} is decided by {' or '.join(approvers) or 'operators'} only"
        )
        self.approvers = approvers


@dataclass(frozen=True)
class Decider:
    """A person deciding an approval: how the decision names them and their credential, their
    canonical ids, and whether they decide as a guardian of the learner (not as an operator)."""

    name: str
    credential_id: str
    identities: frozenset[str]
    as_guardian: bool = False

    def is_party(self, ids: Iterable[str | None]) -> bool:
        return any(canonical_id(value) in self.identities for value in ids if value)


class ApprovalBusy(Exception):
    """An identical call is running under the approval; the repeat may retry shortly."""


class ApprovalCutShort(Exception):
    """The approved call ended after its caller's deadline; nothing of it was committed."""


class ApprovalRequestsLimited(Exception):
    """The agent asked for too many approvals with this credential recently."""

    def __init__(self, retry_after_seconds: float) -> None:
        super().__init__("too many approval requests")
        self.retry_after_seconds = retry_after_seconds


@dataclass(frozen=True)
class CallBinding:
    """The call an approval is for: what it is bound to, and what an operator is shown."""

    agent_id: str
    user_id: str | None
    tool_id: str
    #: Canonical JSON of the arguments; the approval is bound to its digest.
    arguments_json: str
    policy_name: str | None
    policy_version: str
    #: What the call is about ("learner:L-2041-1"); shown, not compared (it comes from the
    #: arguments).
    resource: str | None = None
    #: The credential of the call (the agent token's id, or ``oauth-client:<id>`` for an OAuth
    #: access token: the tokens are renewed hourly, the client's consent is what persists; None
    #: for agents' legacy tokens, before migration 0019) and its user's source.
    token_id: str | None = None
    user_source: str = "none"

    @property
    def arguments_digest(self) -> str:
        return _sha256(self.arguments_json)


def bind_call(
    principal: Principal,
    tool_id: str,
    arguments: Mapping[str, Any],
    policy: Policy | None,
    resource: str | None,
) -> CallBinding:
    """The binding of a call that ``policy`` sends for approval (None: the CRITICAL rule, which
    no policy can lift); ``arguments`` are the validated ones, as JSON values."""
    return CallBinding(
        agent_id=principal.agent_id,
        user_id=principal.user_id,
        tool_id=tool_id,
        arguments_json=canonical_arguments(arguments),
        policy_name=policy.name if policy else None,
        policy_version=policy.versioned_name if policy else "critical-risk@builtin",
        resource=resource,
        token_id=principal.credential.binding,
        user_source=principal.user_source.value,
    )


@dataclass(frozen=True)
class ApprovalOutcome(Generic[T]):
    """How a call that needs approval ended, as its audit row and its answer say it."""

    status: CallStatus
    output: T | None = None
    error: ToolError | None = None
    #: The id of the approval request the call filed, when it filed one.
    requested: str | None = None


def caller_deadline() -> float | None:
    """The caller's deadline (gRPC) as :func:`time.monotonic`; None without one (MCP)."""
    try:
        remaining = downstream_timeout()
    except ServiceError:
        remaining = 0.0
    return None if remaining is None else time.monotonic() + remaining


def out_of_time() -> ToolError:
    """An approved call that ran past its caller's deadline: rolled back, so it may be repeated."""
    return ToolError(
        ErrorCode.DEPENDENCY_ERROR,
        "the call ran out of time; nothing was changed",
        retryable=True,
    )


@dataclass(frozen=True)
class Approval:
    approval_id: str
    agent_id: str
    user_id: str | None
    tool_id: str
    arguments_digest: str
    #: None on approvals requested before the arguments were kept.
    arguments_json: str | None
    resource: str | None
    policy_name: str | None
    policy_version: str
    status: ApprovalStatus
    request_id: str
    created_at: datetime
    expires_at: datetime
    decided_at: datetime | None
    decided_by: str | None
    decision_note: str | None
    token_id: str | None = None
    user_source: str | None = None
    decide_by: datetime | None = None
    #: Who may decide it (:data:`OPERATOR`, :data:`GUARDIAN`); filled where listed.
    approvers: tuple[str, ...] = ()
    #: The operator who issued the call's agent token; filled where listed.
    token_issued_by: str | None = None


_COLUMNS = """id AS approval_id, agent_id, user_id, tool_id, arguments_digest, arguments_json,
    resource, policy_name, policy_version, status, request_id, created_at, expires_at,
    decided_at, decided_by, decision_note, token_id, user_source, decide_by"""

# An approval with who may decide it and who issued its token (listings and decisions).
_LISTED = """
SELECT a.id AS approval_id, a.agent_id, a.user_id, a.tool_id, a.arguments_digest,
       a.arguments_json, a.resource, a.policy_name, a.policy_version, a.status, a.request_id,
       a.created_at, a.expires_at, a.decided_at, a.decided_by, a.decision_note, a.token_id,
       a.user_source, coalesce(a.decide_by, a.expires_at) AS decide_by,
       string_to_array(coalesce(p.approvers, 'operator'), ',') AS approvers,
       t.issued_by AS token_issued_by, o.user_id AS issuer_user_id
FROM toolplane.approvals AS a
LEFT JOIN toolplane.policies AS p ON p.name = a.policy_name
LEFT JOIN toolplane.agent_tokens AS t ON t.id = a.token_id
LEFT JOIN toolplane.operators AS o ON o.id = t.issued_by
"""

# What an approval is bound to, in the order of _bound_values.
_BOUND = """agent_id = $1 AND user_id IS NOT DISTINCT FROM $2 AND tool_id = $3
      AND arguments_digest = $4 AND policy_version = $5
      AND token_id IS NOT DISTINCT FROM $6 AND user_source = $7"""

# Pending past the time to decide: denied; approved but unused past the expiry: expired.
_EXPIRE = """
WITH denied AS (
    UPDATE toolplane.approvals SET status = 'denied'
    WHERE status = 'pending' AND coalesce(decide_by, expires_at) <= now()
)
UPDATE toolplane.approvals SET status = 'expired'
WHERE status = 'approved' AND expires_at <= now()
"""

# No SKIP LOCKED: a repeat while an earlier attempt holds the approval waits for it (bounded by
# the transaction's lock_timeout), then sees it approved again (that attempt rolled back) or
# consumed (it committed), never "missing".
_CONSUME = f"""
UPDATE toolplane.approvals SET status = 'consumed', consumed_at = now()
WHERE id = (
    SELECT id FROM toolplane.approvals
    WHERE {_BOUND}
      AND status = 'approved' AND expires_at > now()
    ORDER BY created_at
    LIMIT 1
    FOR UPDATE)
RETURNING {_COLUMNS}
"""

_PENDING = f"""
SELECT {_COLUMNS} FROM toolplane.approvals
WHERE {_BOUND}
  AND status = 'pending' AND coalesce(decide_by, expires_at) > now()
"""


# The partial unique index on pending approvals makes a concurrent duplicate a no-op.
_REQUEST = f"""
INSERT INTO toolplane.approvals (agent_id, user_id, tool_id, arguments_digest, policy_version,
    token_id, user_source, policy_name, arguments_json, resource, request_id, expires_at,
    decide_by)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, now() + make_interval(secs => $12),
    now() + make_interval(secs => least($12, $13)))
ON CONFLICT DO NOTHING
RETURNING {_COLUMNS}
"""

#: Window over which approval requests are counted: ``requests_per_hour`` at once, refilled at
#: that rate.
REQUEST_WINDOW_SECONDS = 3600.0


def _approval(row: asyncpg.Record) -> Approval:
    values = dict(row)
    values.pop("issuer_user_id", None)
    values["status"] = ApprovalStatus(values["status"])
    values["approvers"] = tuple(values.get("approvers") or ())
    return Approval(**values)


def _bound_values(binding: CallBinding) -> tuple[str | None, ...]:
    return (
        binding.agent_id,
        binding.user_id,
        binding.tool_id,
        binding.arguments_digest,
        binding.policy_version,
        binding.token_id,
        binding.user_source,
    )


class CallApprovals:
    """Approvals as a call that needs one meets them: run under a matching one, or request one."""

    def __init__(
        self,
        pool: Pool,
        *,
        ttl_seconds: int,
        decide_seconds: int | None = None,
        requests_per_hour: int = 20,
        busy_wait_seconds: float = 5.0,
    ) -> None:
        self._pool = pool
        self._ttl_seconds = ttl_seconds
        self._decide_seconds = ttl_seconds if decide_seconds is None else decide_seconds
        self._requests_per_hour = requests_per_hour
        self._busy_wait_seconds = busy_wait_seconds

    async def run_approved(
        self,
        binding: CallBinding,
        run: Callable[[Approval, Connection], Awaitable[T]],
        *,
        deadline: float | None = None,
    ) -> tuple[Approval, T] | None:
        """Run ``run`` under a matching approval, or return None when there is none.

        The approval is consumed inside a transaction that ``run`` gets the connection of; it
        commits only when ``run`` returns before ``deadline`` (the caller's, as
        :func:`time.monotonic`): whatever ``run`` raises (a tool error, a timeout, a
        cancellation), and a ``run`` that ends after the caller gave up, roll it back, so the
        approval stays usable and a call cut short never takes effect. An approval held by an
        identical call still running is waited for, at most the busy wait (or until
        ``deadline``); :class:`ApprovalBusy` when it is still held then.
        """
        wait = self._busy_wait_seconds
        if deadline is not None:
            wait = min(wait, deadline - time.monotonic())
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(f"SET LOCAL lock_timeout = {max(1, int(wait * 1000))}")
            try:
                row = await conn.fetchrow(_CONSUME, *_bound_values(binding))
            except asyncpg.LockNotAvailableError:
                raise ApprovalBusy from None
            # The tool's own writes wait for locks as anywhere else, within the caller's time.
            await conn.execute("SET LOCAL lock_timeout = DEFAULT")
            if row is None:
                return None
            if deadline is not None:
                left_ms = max(1, int((deadline - time.monotonic()) * 1000))
                await conn.execute(f"SET LOCAL statement_timeout = {left_ms}")
            approval = _approval(row)
            result = await run(approval, conn)
            if deadline is not None and time.monotonic() >= deadline:
                raise ApprovalCutShort
            return approval, result

    async def run_or_request(
        self,
        binding: CallBinding,
        run: Callable[[Approval, Connection], Awaitable[T]],
        *,
        request_id: str,
        deadline: float | None,
    ) -> ApprovalOutcome[T]:
        """Run the call under an approval of exactly this call (:meth:`run_approved`); without
        one, file the request an operator must decide (:meth:`request`). Every way this can end
        is an outcome: a failure of ``run`` is the call's error, never the router's."""
        try:
            ran = await self.run_approved(binding, run, deadline=deadline)
        except ToolError as failed:
            return ApprovalOutcome(CallStatus.ERROR, error=failed)
        except ApprovalCutShort:
            return ApprovalOutcome(CallStatus.ERROR, error=out_of_time())
        except ApprovalBusy:
            busy = ToolError(
                ErrorCode.CONFLICT,
                "an identical call is running under this approval; repeat it once it has ended",
                retryable=True,
            )
            return ApprovalOutcome(CallStatus.ERROR, error=busy)
        if ran is not None:
            return ApprovalOutcome(CallStatus.SUCCESS, output=ran[1])
        try:
            approval = await self.request(binding, request_id)
        except ApprovalRequestsLimited as limited:
            flood = ToolError(
                ErrorCode.RATE_LIMITED,
                "too many approval requests from this agent with this credential; wait for "
                "decisions",
                details={"retry_after_seconds": round(limited.retry_after_seconds)},
            )
            return ApprovalOutcome(CallStatus.DENIED, error=flood)
        waiting = ToolError(
            ErrorCode.APPROVAL_REQUIRED,
            "this call needs a person's approval; repeat it with the same arguments once approved",
            details={
                "approval_id": approval.approval_id,
                "expires_at": approval.expires_at.isoformat(),
                "policy": binding.policy_version,
            },
        )
        return ApprovalOutcome(
            CallStatus.APPROVAL_REQUIRED, error=waiting, requested=approval.approval_id
        )

    def _requests_bucket(self, binding: CallBinding) -> Bucket:
        # Per agent and credential: the user is the agent's to name (asserted) or the
        # credential's own (bound, vouched), so counting per user would let an agent file
        # without end by changing the name it sends.
        key = bucket_key("approval-requests", binding.agent_id, binding.token_id or "")
        rate = self._requests_per_hour / REQUEST_WINDOW_SECONDS
        return Bucket(key, rate, self._requests_per_hour)

    async def request(self, binding: CallBinding, request_id: str) -> Approval:
        """The pending approval request of this call, created if there is none and the agent
        has not asked for too many for this user lately (:class:`ApprovalRequestsLimited`)."""
        values = _bound_values(binding)
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(_EXPIRE)
            pending = await conn.fetchrow(_PENDING, *values)
            if pending is not None:
                return _approval(pending)
            # The shared buckets of the call limits, in this transaction: a request that is not
            # created gives its token back.
            taken = await SharedBuckets.take_in(conn, [self._requests_bucket(binding)])
            if not taken.admitted:
                raise ApprovalRequestsLimited(max(1.0, taken.wait))
            for _ in range(2):
                created = await conn.fetchrow(
                    _REQUEST, *values, binding.policy_name, binding.arguments_json,
                    binding.resource, request_id, float(self._ttl_seconds),
                    float(self._decide_seconds),
                )  # fmt: skip
                if created is not None:
                    return _approval(created)
                pending = await conn.fetchrow(_PENDING, *values)
                if pending is not None:
                    return _approval(pending)
        raise RuntimeError("no approval could be created or found")


class ApprovalStore:
    """What people do with approvals: list them and decide pending ones."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def list(
        self,
        *,
        status: ApprovalStatus | None,
        limit: int,
        after: str | None,
        resource: str | None = None,
    ) -> tuple[list[Approval], str | None]:
        """Approvals, pending first and then newest first, ``limit`` at a time (only those
        about ``resource`` when given); returns the next page token."""
        cursor = _decode_cursor(after) if after else None
        async with self._pool.acquire() as conn:
            await conn.execute(_EXPIRE)
            rows = await conn.fetch(
                f"""
                {_LISTED}
                WHERE ($1::text IS NULL OR a.status = $1)
                  AND ($5::text IS NULL OR a.resource = $5)
                  AND ($2::timestamptz IS NULL
                       OR (a.status <> 'pending') > $6::boolean
                       OR ((a.status <> 'pending') = $6::boolean
                           AND (a.created_at, a.id) < ($2, $3)))
                ORDER BY a.status <> 'pending', a.created_at DESC, a.id DESC
                LIMIT $4
                """,
                status.value if status else None,
                cursor[1] if cursor else None,
                cursor[2] if cursor else None,
                limit + 1,
                resource,
                cursor[0] if cursor else None,
            )
        approvals = [_approval(row) for row in rows[:limit]]
        if len(rows) <= limit:
            return approvals, None
        last = approvals[-1]
        return approvals, _encode_cursor(
            last.status is not ApprovalStatus.PENDING, last.created_at, last.approval_id
        )

    async def get(self, approval_id: str) -> Approval:
        """One approval as listed; :class:`ApprovalNotFound` when there is none."""
        async with self._pool.acquire() as conn:
            await conn.execute(_EXPIRE)
            row = await conn.fetchrow(f"{_LISTED} WHERE a.id = $1", approval_id)
        if row is None:
            raise ApprovalNotFound(f"no approval {approval_id}")
        return _approval(row)

    async def decide(
        self, approval_id: str, *, approve: bool, decider: Decider, note: str
    ) -> Approval:
        """Approve or reject a pending approval as ``decider``: never one whose parties (its
        user, whatever the source, and its token's issuer) include the decider
        (:class:`SelfApproval`), and as a guardian only where the policy names guardians
        (:class:`NotAnApprover`)."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(_EXPIRE)
            current = await conn.fetchrow(f"{_LISTED} WHERE a.id = $1 FOR UPDATE OF a", approval_id)
            if current is None:
                raise ApprovalNotFound(f"no approval {approval_id}")
            parties = (current["user_id"], current["token_issued_by"], current["issuer_user_id"])
            if decider.is_party(parties):
                raise SelfApproval(approval_id)
            approvers = tuple(current["approvers"])
            if (GUARDIAN if decider.as_guardian else OPERATOR) not in approvers:
                raise NotAnApprover(approval_id, approvers)
            row = await conn.fetchrow(
                """
                UPDATE toolplane.approvals
                SET status = $2, decided_by = $3, decided_by_token = $4, decided_at = now(),
                    decision_note = $5
                WHERE id = $1 AND status = 'pending'
                RETURNING id
                """,
                approval_id,
                ApprovalStatus.APPROVED.value if approve else ApprovalStatus.REJECTED.value,
                decider.name,
                decider.credential_id,
                note or None,
            )
            decided = await conn.fetchrow(f"{_LISTED} WHERE a.id = $1", approval_id)
            if row is not None and decided is not None:
                return _approval(decided)
        raise ApprovalNotPending(approval_id, ApprovalStatus(current["status"]))


# Approval ids are UUIDs; a page token carries one back.
_CURSOR_ID = re.compile(r"[0-9a-f-]{1,64}")
_LISTING = "approvals"


def _encode_cursor(decided: bool, created_at: datetime, approval_id: str) -> str:
    return encode_page_token(_LISTING, int(decided), created_at.isoformat(), approval_id)


def _decode_cursor(token: str) -> tuple[bool, datetime, str]:
    """The position a page token continues after (past the pending ones or not, time, id);
    anything this listing did not hand out (including times PostgreSQL cannot hold, or an id no
    approval can have) is refused."""
    try:
        decided, created_at, approval_id = decode_page_token(token, _LISTING, 3)
        if decided not in (0, 1) or not isinstance(created_at, str):
            raise ValueError("not a cursor")
        if not isinstance(approval_id, str):
            raise ValueError("not a cursor")
        moment = datetime.fromisoformat(created_at)
        if moment.tzinfo is None or not _CURSOR_ID.fullmatch(approval_id):
            raise ValueError("not a cursor")
        return bool(decided), moment.astimezone(UTC), approval_id
    except (ValueError, OverflowError) as error:
        raise ApprovalError("invalid page token") from error
