"""The retention table: every store of the AI plane that holds something about a learner, what
it holds, why, for how long, and what expiry and erasure do to it.

This is policy, kept as data a privacy officer can read and argue with (like the purpose table).
``nemo purge`` enforces every row; ``nemo retention`` prints the table, and
``docs/operations/learner-rights.md`` shows it against the law it answers to. A store that is
added without a row here has no limit, and the rights tests fail until it has one.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final


class Expiry(StrEnum):
    """What happens to a row or object past its period."""

    DELETE = "delete"
    DELINK = "strip the learner link, keep the pseudonymous shape"
    EVICT = "evicted from memory"
    PLATFORM = "not expired here: the platform's own retention applies"


class OnErasure(StrEnum):
    """What an erasure does to the store."""

    DELETE = "delete"
    DELINK = "strip the learner link"
    UNREACHABLE = "unreachable at once (no build for the learner), evicted within its period"
    NOTHING = "nothing to erase: holds no learner link"
    KEEP_DIGEST = "kept: names the learner by subject digest only"


@dataclass(frozen=True)
class RetentionRule:
    """One store and its limit."""

    store: str
    location: str
    holds: str
    purpose: str
    period: str
    """The period as a person reads it; ``days`` is what the purge applies."""
    days: int | None
    """Days after ``counted_from`` (None: set by ``setting``, or not expired here)."""
    counted_from: str
    on_expiry: Expiry
    on_erasure: OnErasure
    written_by: str
    setting: str | None = None
    """The setting that sets the period instead of ``days``."""
    seconds: int | None = None
    """A lifetime in process memory fixed in code, instead of ``days``."""

    def __post_init__(self) -> None:
        periods = [value for value in (self.days, self.setting, self.seconds) if value is not None]
        if len(periods) != 1 and self.on_expiry is not Expiry.PLATFORM:
            raise ValueError(f"{self.store}: a period comes from days, a setting or seconds")
        if len(self.purpose) < 40:
            raise ValueError(f"{self.store}: a purpose a person can argue with, please")


SNAPSHOT_RETENTION_SETTING: Final = "NEMO_CONTEXT_SNAPSHOT_RETENTION_DAYS"
CACHE_TTL_SETTING: Final = "NEMO_GATEWAY_CACHE_TTL_SECONDS"

RETENTION: Final[tuple[RetentionRule, ...]] = (
    RetentionRule(
        store="snapshots",
        location="snapshot store ai-context/<day>/<learner_ref>/<uuid>.json (every version) "
        "and learning.context_snapshots",
        holds="exactly what a model or an agent saw about the learner (sealed under the "
        "learner's data key), with its digest",
        purpose="Explaining and reproducing an AI result or an agent's action from the "
        "input_ref recorded with it, for complaints and audits.",
        period="the snapshot retention setting (30 days in production)",
        days=None,
        setting=SNAPSHOT_RETENTION_SETTING,
        counted_from="the day the snapshot was written (UTC)",
        on_expiry=Expiry.DELETE,
        on_erasure=OnErasure.DELETE,
        written_by="context service",
    ),
    RetentionRule(
        store="snapshot_keys",
        location="learning.snapshot_keys",
        holds="the learner's snapshot data key, wrapped under the master key, by subject",
        purpose="Destroying it makes every copy of the learner's snapshots unreadable, "
        "backups and old object versions included.",
        period="as long as a snapshot uses it, then the snapshot retention",
        days=None,
        setting=SNAPSHOT_RETENTION_SETTING,
        counted_from="the key's creation, once no snapshot is sealed under it",
        on_expiry=Expiry.DELETE,
        on_erasure=OnErasure.DELETE,
        written_by="context service",
    ),
    RetentionRule(
        store="conversations",
        location="learning.chat_sessions, chat_messages, conversation_state, "
        "conversation_summaries",
        holds="a tutoring chat's turns, its structured state and its summaries",
        purpose="Continuing a tutoring conversation where it stopped; an idle chat is not "
        "picked up again after half a school year.",
        period="180 days",
        days=180,
        counted_from="the session's last turn",
        on_expiry=Expiry.DELETE,
        on_erasure=OnErasure.DELETE,
        written_by="context service (RecordTurn), sessions opened by the platform",
    ),
    RetentionRule(
        store="generated_items",
        location="knowledge.items with origin 'generated'",
        holds="practice items written by a model from curriculum content, with answer keys",
        purpose="Grading answers to generated items; an item nobody answered in a year "
        "serves no grading.",
        period="365 days unless an answer refers to it",
        days=365,
        counted_from="the item's creation",
        on_expiry=Expiry.DELETE,
        on_erasure=OnErasure.NOTHING,
        written_by="context service (StoreGeneratedItems)",
    ),
    RetentionRule(
        store="audit_rows",
        location="toolplane.audit_logs",
        holds="one row per agent call: agent, tool, decision, time, the resource "
        "(learner:<id>), the user acted for, the snapshot the agent saw",
        purpose="Accountability for what agents did with a child's data; after a year "
        "only the counts are needed, not who.",
        period="365 days",
        days=365,
        counted_from="the call",
        on_expiry=Expiry.DELINK,
        on_erasure=OnErasure.DELINK,
        written_by="tool plane",
    ),
    RetentionRule(
        store="approvals",
        location="toolplane.approvals",
        holds="calls that waited for a person: agent, user, tool, the arguments (naming the "
        "learner), the decision",
        purpose="Showing who allowed an agent's risky action and what exactly it was "
        "allowed to do.",
        period="90 days",
        days=90,
        counted_from="the request (one still pending: from its expiry)",
        on_expiry=Expiry.DELETE,
        on_erasure=OnErasure.DELETE,
        written_by="tool plane",
    ),
    RetentionRule(
        store="agent_tokens",
        location="toolplane.agent_tokens bound to a user",
        holds="the user an agent token acts for (the token itself only as a hash)",
        purpose="Knowing whom a token acted for while it can still be presented, and "
        "briefly after, for audits.",
        period="90 days after it was revoked or expired",
        days=90,
        counted_from="revocation or expiry, whichever came first",
        on_expiry=Expiry.DELETE,
        on_erasure=OnErasure.DELETE,
        written_by="operators (nemo issue-token, IssueAgentToken)",
    ),
    RetentionRule(
        store="rate_buckets",
        location="toolplane.rate_buckets",
        holds="call-limit counters keyed by agent, user and tool",
        purpose="Holding agents to their call limits across replicas; a full bucket "
        "carries no information.",
        period="until the bucket is full again (minutes)",
        days=0,
        counted_from="the last call",
        on_expiry=Expiry.DELETE,
        on_erasure=OnErasure.DELETE,
        written_by="tool plane",
    ),
    RetentionRule(
        store="result_cache",
        location="gateway memory, per replica",
        holds="a prompt's model result, keyed by the learner's ref and the bundle's digest",
        purpose="Answering the same request on the same data without another model call.",
        period="the cache lifetime setting (300 seconds)",
        days=None,
        setting=CACHE_TTL_SETTING,
        counted_from="the model's answer",
        on_expiry=Expiry.EVICT,
        on_erasure=OnErasure.UNREACHABLE,
        written_by="gateway",
    ),
    RetentionRule(
        store="circle_fingerprints",
        location="context service memory, per replica",
        holds="keyed fingerprints (HMAC) of the words of the names, contact data, schools and "
        "birth dates of the learner and the people around it, under the learner's id; never "
        "the identifiers themselves",
        purpose="Finding the child's and its family's identifiers in what a bundle or a turn "
        "carries, without the database deriving every fingerprint again for every build.",
        period="60 seconds",
        days=None,
        seconds=60,
        counted_from="the build that read them from the database",
        on_expiry=Expiry.EVICT,
        on_erasure=OnErasure.UNREACHABLE,
        written_by="context service (the identifier gate)",
    ),
    RetentionRule(
        store="rights_requests",
        location="rights.requests, rights.request_events",
        holds="each export, erasure and restriction request, its clocks, its steps and "
        "receipt; the learner only as a subject digest",
        purpose="Proving to a family or a regulator that a request was handled, and when.",
        period="3 years",
        days=3 * 365,
        counted_from="the request's completion",
        on_expiry=Expiry.DELETE,
        on_erasure=OnErasure.KEEP_DIGEST,
        written_by="nemo rights, the context service",
    ),
    RetentionRule(
        store="erasure_ledger",
        location="snapshot store rights-ledger/<request_id>.json and rights.blocks "
        "(erasure tombstones)",
        holds="which subject was erased (and its snapshot refs, as keyed digests), when, and "
        "the receipt's counts",
        purpose="Erasing again after a database restore from a backup older than the "
        "erasure, and refusing the learner if its records come back.",
        period="400 days (longer than any backup is kept)",
        days=400,
        counted_from="the erasure",
        on_expiry=Expiry.DELETE,
        on_erasure=OnErasure.KEEP_DIGEST,
        written_by="nemo rights",
    ),
    RetentionRule(
        store="learner_record",
        location="learning.learners and the rows keyed to it (mastery, evidence, goals, "
        "models, relations); learning.users of the learner's own account",
        holds="the platform's record of the learner, which the context service reads",
        purpose="Building what a purpose may see; the platform owns and maintains it.",
        period="the platform's",
        days=None,
        counted_from="-",
        on_expiry=Expiry.PLATFORM,
        on_erasure=OnErasure.DELETE,
        written_by="the learning platform",
    ),
)


def retention_rule(store: str) -> RetentionRule:
    """The row of ``store``; ``KeyError`` for a store the table does not list."""
    for rule in RETENTION:
        if rule.store == store:
            return rule
    raise KeyError(store)


def render_table() -> str:
    """The table as Markdown, as the operations docs show it."""
    lines = [
        "| store | where | holds | purpose | kept | on expiry | on erasure |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for rule in RETENTION:
        kept = (
            f"{rule.period}, from {rule.counted_from}" if rule.counted_from != "-" else rule.period
        )
        lines.append(
            f"| `{rule.store}` | {rule.location} | {rule.holds} | {rule.purpose} | {kept} "
            f"| {rule.on_expiry} | {rule.on_erasure} |"
        )
    return "\n".join(lines)
