"""THE purpose table: what a model or an agent may see about a learner, and why.

Every prompt purpose, conversation and agent view is one row here: the data slices it may read,
its limits, and a reason a person can argue with. Giving a purpose more data means editing its row
in this table (reviewed like any policy change, with :data:`POLICY_VERSION` bumped), never adding a
query to a handler. Each row also says what a build does when text a person wrote holds an
identifier of the child or the people around the child (mask it, or refuse the build). A purpose
that is not in the table is an error, never an empty bundle.
``ListPurposes`` serves this table as it is.

Which caller may build which kind of purpose is in ``acl.py``, next to the RPC table.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Final

import grpc

from nemo_context.errors import service_error
from nemo_core.errors import ServiceError
from nemo_protos.context.v1 import context_service_pb2, purpose_pb2
from nemo_protos.context.v1.error_reason_pb2 import ErrorReason

POLICY_VERSION: Final = "purposes-2026-12.1"
"""Version of this table; bundles carry it, so a snapshot says which rules decided its content."""


PROMPT: Final = purpose_pb2.PURPOSE_KIND_PROMPT
AGENT_VIEW: Final = purpose_pb2.PURPOSE_KIND_AGENT_VIEW
CONVERSATION: Final = purpose_pb2.PURPOSE_KIND_CONVERSATION

MASK: Final = purpose_pb2.IDENTIFIER_ACTION_MASK
"""An identifier in text a person wrote is replaced by a typed placeholder; the build goes on."""
REFUSE: Final = purpose_pb2.IDENTIFIER_ACTION_REFUSE
"""An identifier in text a person wrote refuses the build, as it does in structured fields."""


class Slice(StrEnum):
    """One kind of learner data a purpose may declare."""

    PROFILE = "profile"
    """Grade only."""
    AGE = "age"
    """Age in whole years (never the birth date)."""
    MASTERY = "mastery"
    """Mastery per knowledge node, weakest first, cut at the purpose's limit."""
    RECENT_EVIDENCE = "recent_evidence"
    """The latest answers as correct/incorrect and reliability; never the answer itself."""
    GOAL = "goal"
    """The current learning goal."""
    RETENTION = "retention"
    """Knowledge due for review, soonest first."""
    LEARNING_CONTEXT = "context"
    """Current subject, strand, package and focus nodes (computed model)."""
    LEARNING_PROGRESS = "learning_progress"
    """Activity of the period (computed model) and node counts per knowledge state."""
    COMPETENCY_PROFILE = "competency_profile"
    """Competency levels (computed model)."""
    READINESS = "readiness"
    """Readiness for the next milestone (computed model)."""
    CURRENT_PLAN = "current_plan"
    """The current learning plan (computed model)."""
    NEXT_EXPERIENCE = "next_experience"
    """The recommended next experience with its reason (computed model)."""
    CONVERSATION_HISTORY = "conversation_history"
    """Completed messages of the recent turns of one chat session."""
    CONVERSATION_SUMMARY = "conversation_summary"
    """The latest stored summary of the older turns."""
    CONVERSATION_STATE = "conversation_state"
    """Structured state of the session (extracted info, agent state)."""
    KNOWLEDGE = "knowledge"
    """Knowledge nodes retrieved for the current message (curriculum, not learner data)."""


CONVERSATION_SLICES: Final = frozenset(
    {
        Slice.PROFILE,
        Slice.AGE,
        Slice.CONVERSATION_HISTORY,
        Slice.CONVERSATION_SUMMARY,
        Slice.CONVERSATION_STATE,
        Slice.KNOWLEDGE,
    }
)
"""What a conversation bundle can hold: a conversation purpose declares only these, and the
conversation-only ones belong to conversation purposes alone."""

TUTOR_CHAT: Final = "tutor_chat"
"""The conversation purpose ``BuildConversationContext`` builds."""


@dataclass(frozen=True)
class Purpose:
    """One row of the purpose table."""

    name: str
    kind: purpose_pb2.PurposeKind.ValueType
    slices: tuple[Slice, ...]
    reason: str
    written_text_identifiers: purpose_pb2.IdentifierAction.ValueType
    """What a build does with an identifier in text a person wrote (structured fields always
    refuse): :data:`MASK` or :data:`REFUSE`."""
    mastery_limit: int = 0
    evidence_limit: int = 0
    retention_limit: int = 0

    def __post_init__(self) -> None:
        limits = (
            (Slice.MASTERY, self.mastery_limit),
            (Slice.RECENT_EVIDENCE, self.evidence_limit),
            (Slice.RETENTION, self.retention_limit),
        )
        for slice_, limit in limits:
            # A declared list slice without a limit would read everything; a limit without the
            # slice would suggest data the purpose never gets.
            if (slice_ in self.slices) != (limit > 0):
                raise ValueError(f"purpose {self.name}: {slice_} and its limit go together")
        if self.written_text_identifiers not in (MASK, REFUSE):
            raise ValueError(f"purpose {self.name}: written_text_identifiers is MASK or REFUSE")
        if len(set(self.slices)) != len(self.slices):
            raise ValueError(f"purpose {self.name} declares a slice twice")
        conversation_only = CONVERSATION_SLICES - {Slice.PROFILE, Slice.AGE}
        if self.kind == CONVERSATION and not CONVERSATION_SLICES.issuperset(self.slices):
            raise ValueError(f"conversation purpose {self.name} declares a slice it cannot hold")
        if self.kind != CONVERSATION and not conversation_only.isdisjoint(self.slices):
            raise ValueError(f"purpose {self.name} declares a conversation slice")

    def declares(self, slice_: Slice) -> bool:
        """Whether the purpose may read ``slice_``."""
        return slice_ in self.slices

    def to_proto(self) -> purpose_pb2.Purpose:
        """The row as ``ListPurposes`` returns it."""
        return purpose_pb2.Purpose(
            name=self.name,
            kind=self.kind,
            slices=[str(slice_) for slice_ in self.slices],
            mastery_limit=self.mastery_limit,
            evidence_limit=self.evidence_limit,
            retention_limit=self.retention_limit,
            reason=self.reason,
            written_text_identifiers=self.written_text_identifiers,
        )


def _table(rows: Iterable[Purpose]) -> Mapping[str, Purpose]:
    table: dict[str, Purpose] = {}
    for row in rows:
        if row.name in table:
            raise ValueError(f"purpose {row.name} is declared twice")
        table[row.name] = row
    return MappingProxyType(table)


PURPOSES: Final = _table(
    (
        # Prompt purposes: the gateway turns the bundle into a model prompt.
        Purpose(
            "item_generation",
            PROMPT,
            (Slice.PROFILE, Slice.MASTERY),
            "Writing practice items needs the grade and the nodes the learner is weakest in; "
            "how each past question was answered would not make a better item.",
            mastery_limit=8,
            written_text_identifiers=MASK,
        ),
        Purpose(
            "tutor_hint",
            PROMPT,
            (Slice.PROFILE, Slice.MASTERY, Slice.RECENT_EVIDENCE),
            "A hint must aim at what the learner just got wrong, so it needs whether the latest "
            "answers were right or wrong, and how reliable that is; never what the child wrote.",
            mastery_limit=5,
            evidence_limit=10,
            written_text_identifiers=MASK,
        ),
        Purpose(
            "plan_explanation",
            PROMPT,
            (Slice.PROFILE, Slice.MASTERY, Slice.GOAL),
            "Explaining a plan needs the goal it serves and a wider view of mastery; single "
            "attempts do not change the explanation.",
            mastery_limit=12,
            written_text_identifiers=MASK,
        ),
        Purpose(
            "portrait_summary",
            PROMPT,
            (Slice.PROFILE, Slice.MASTERY, Slice.GOAL, Slice.RETENTION),
            "A portrait describes long-term trends, including what is fading from memory; it "
            "needs no single answers and certainly no name.",
            mastery_limit=12,
            retention_limit=10,
            written_text_identifiers=MASK,
        ),
        # Conversations: the gateway builds a chat turn from a conversation bundle.
        Purpose(
            TUTOR_CHAT,
            CONVERSATION,
            (
                Slice.PROFILE,
                Slice.CONVERSATION_HISTORY,
                Slice.CONVERSATION_SUMMARY,
                Slice.CONVERSATION_STATE,
                Slice.KNOWLEDGE,
            ),
            "A tutoring reply needs the conversation so far (finished messages, the summary of "
            "older turns, the session's state), knowledge about the question and the grade to "
            "pitch the answer; the learning record beyond that is not needed to chat.",
            written_text_identifiers=MASK,
        ),
        # Agent views: the tool plane returns the bundle to an agent as a tool result.
        Purpose(
            "profile",
            AGENT_VIEW,
            (Slice.PROFILE, Slice.AGE),
            "An agent that teaches a child needs grade and age to pitch its language; it never "
            "needs the birth date, social links or photos.",
            written_text_identifiers=MASK,
        ),
        Purpose(
            "context",
            AGENT_VIEW,
            (Slice.LEARNING_CONTEXT,),
            "To help with what the learner is doing now, an agent needs the current subject, "
            "strand, package and focus nodes as the learning engine computed them.",
            written_text_identifiers=MASK,
        ),
        Purpose(
            "learning_progress",
            AGENT_VIEW,
            (Slice.LEARNING_PROGRESS,),
            "Reporting progress to a parent or mentor needs the period's activity and how many "
            "nodes are solid, shaky, gaps or unknown; not individual answers.",
            written_text_identifiers=MASK,
        ),
        Purpose(
            "competency_profile",
            AGENT_VIEW,
            (Slice.COMPETENCY_PROFILE,),
            "Discussing strengths needs competency levels with their confidence, as computed; "
            "nothing about single items.",
            written_text_identifiers=MASK,
        ),
        Purpose(
            "readiness",
            AGENT_VIEW,
            (Slice.READINESS,),
            "Advising on an upcoming milestone needs the computed readiness, its confidence and "
            "what holds it back.",
            written_text_identifiers=MASK,
        ),
        Purpose(
            "mastery",
            AGENT_VIEW,
            (Slice.MASTERY,),
            "Choosing what to practise needs mastery per node with its confidence, weakest "
            "first; thirty nodes cover any realistic next step.",
            mastery_limit=30,
            written_text_identifiers=MASK,
        ),
        Purpose(
            "current_plan",
            AGENT_VIEW,
            (Slice.CURRENT_PLAN,),
            "Following or explaining the plan needs its steps in the engine's order; an agent "
            "never reorders them.",
            written_text_identifiers=MASK,
        ),
        Purpose(
            "next_learning_experience",
            AGENT_VIEW,
            (Slice.NEXT_EXPERIENCE,),
            "Proposing the next activity needs the engine's recommendation and its reason, so "
            "the agent can explain it to a person instead of inventing one.",
            written_text_identifiers=MASK,
        ),
        Purpose(
            "learning_state",
            AGENT_VIEW,
            (
                Slice.PROFILE,
                Slice.AGE,
                Slice.LEARNING_CONTEXT,
                Slice.LEARNING_PROGRESS,
                Slice.READINESS,
                Slice.NEXT_EXPERIENCE,
            ),
            "One picture of where the learner stands (profile, context, progress, readiness, "
            "next step), so an agent needs one call, not five, and no knowledge of where each "
            "piece is stored.",
            written_text_identifiers=MASK,
        ),
    )
)


def unknown_purpose() -> ServiceError:
    """The error for a purpose the table does not declare."""
    return service_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        ErrorReason.UNKNOWN_PURPOSE,
        "the purpose is not declared in the purpose table (see ListPurposes)",
    )


def purpose_named(name: str) -> Purpose:
    """The declared purpose ``name``; INVALID_ARGUMENT / ``UNKNOWN_PURPOSE`` otherwise."""
    purpose = PURPOSES.get(name)
    if purpose is None:
        raise unknown_purpose()
    return purpose


def purpose_table() -> context_service_pb2.ListPurposesResponse:
    """The whole table as ``ListPurposes`` returns it, in declaration order."""
    return context_service_pb2.ListPurposesResponse(
        policy_version=POLICY_VERSION,
        purposes=[purpose.to_proto() for purpose in PURPOSES.values()],
    )
