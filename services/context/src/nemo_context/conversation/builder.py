"""BuildConversationContext: the one place that assembles what a chat turn may see.

What a turn may see is the ``tutor_chat`` row of the purpose table, read on every build, so
``ListPurposes`` and the bundles always agree: the builder reads and fills only the slices the row
declares (profile, age, history, summary, state, knowledge). Given a session, the current turn and
the learner's message, it reads the session bound to its learner, keeps the reusable history (see
:mod:`.filtering`), takes the last N turns of it plus the latest stored summary, adds the
structured state, a minimal pseudonymous profile (the learner ref, the grade) and knowledge
retrieved for the message, redacts what chat text must not carry (see :mod:`.redaction`), trims
the result to the token budget (see :mod:`.budget`) and passes the finished bundle through the
identifier gate. With ``persist`` the bundle is stored as a snapshot and its ``input_ref``
returned, so a run record can say exactly what the tutoring model saw.

Knowledge passages are curriculum, not learner data: a passage the gate would refuse (a lesson
that quotes ``{"email": ...}``, a title that reads like a key) is left out and counted in
``meta.withheld_knowledge_count`` and on ``nemo.context.knowledge.withheld``, rather than failing
every turn that retrieves it. State strings are redacted like chat text: a state stored clean can
name a key that was linked to the learner only later, and must not end the session.

``summary_stale`` is set when a reusable message left out of the bundle (outside the window or
trimmed for the budget) is not covered by the summary the bundle carries: the gateway should then
write a new summary with ``RecordTurn``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import grpc
from opentelemetry import metrics

from nemo_context import knowledge
from nemo_context.conversation import filtering, store
from nemo_context.conversation.budget import trim_to_budget
from nemo_context.errors import service_error
from nemo_context.gate import Gated, find_leak, gate
from nemo_context.gate.circle import Circle
from nemo_context.gate.masking import TextMasker
from nemo_context.gate.text import value_matcher
from nemo_context.pseudonym import Pseudonymizer
from nemo_context.purposes import POLICY_VERSION, TUTOR_CHAT, Purpose, Slice, purpose_named
from nemo_context.settings import ContextSettings
from nemo_context.snapshots.store import SnapshotStore, with_snapshot
from nemo_core.db import Connection, Pool, learner_transaction
from nemo_core.errors import ServiceError
from nemo_core.structs import python_to_struct
from nemo_protos.context.v1 import context_service_pb2 as service_pb
from nemo_protos.context.v1 import conversation_pb2 as pb
from nemo_protos.context.v1 import knowledge_pb2
from nemo_protos.context.v1.error_reason_pb2 import ErrorReason

logger = logging.getLogger(__name__)

BUILD_VERSION: Final = "conversation-builder-2"


MAX_ID_CHARS: Final = 128
MAX_MESSAGE_CHARS: Final = 16_000
MAX_TOKEN_BUDGET: Final = 1_000_000

#: A message hit must score at least this (of 3) to be retrieved: the node's title or an alias
#: must appear in the message, or most of it. Chat messages are long and mostly not about titles.
MIN_MESSAGE_HIT_SCORE: Final = 1.5
#: The session's current topic (``extracted_info.topic_node_id``) is retrieved first, ranked with
#: the highest score a hit can have.
TOPIC_SCORE: Final = 3.0


@dataclass(frozen=True)
class ConversationSettings:
    """The knobs of the builder (from the service settings)."""

    recent_turns: int
    default_token_budget: int
    knowledge_limit: int
    identifier_key: bytes

    @classmethod
    def from_settings(
        cls, settings: ContextSettings, identifier_key: bytes
    ) -> ConversationSettings:
        return cls(
            recent_turns=settings.conversation_recent_turns,
            default_token_budget=settings.conversation_token_budget,
            knowledge_limit=settings.conversation_knowledge_limit,
            identifier_key=identifier_key,
        )


def invalid(
    reason: ErrorReason.ValueType, message: str, metadata: Mapping[str, str] | None = None
) -> ServiceError:
    """INVALID_ARGUMENT with ``reason``."""
    return service_error(grpc.StatusCode.INVALID_ARGUMENT, reason, message, metadata)


def check_ids(session_id: str, turn_id: str) -> None:
    """INVALID_ARGUMENT unless both ids are present, short and free of control characters."""
    for value, reason, name in (
        (session_id, ErrorReason.INVALID_SESSION_ID, "session_id"),
        (turn_id, ErrorReason.INVALID_TURN_ID, "turn_id"),
    ):
        if not value.strip() or len(value) > MAX_ID_CHARS or not value.isprintable():
            raise invalid(reason, f"{name} is required: 1 to {MAX_ID_CHARS} printable characters")


def session_not_found() -> ServiceError:
    """The error for a session id that names no session."""
    return service_error(
        grpc.StatusCode.NOT_FOUND, ErrorReason.SESSION_NOT_FOUND, "no such chat session"
    )


def _budget(request: service_pb.BuildConversationContextRequest, default: int) -> int:
    if request.token_budget == 0:
        return default
    if not 0 < request.token_budget <= MAX_TOKEN_BUDGET:
        raise invalid(
            ErrorReason.INVALID_TOKEN_BUDGET,
            f"token_budget must be between 1 and {MAX_TOKEN_BUDGET} (0 means the default)",
        )
    return request.token_budget


def _validate(request: service_pb.BuildConversationContextRequest) -> None:
    check_ids(request.session_id, request.turn_id)
    message = request.current_user_message
    if not message.strip() or len(message) > MAX_MESSAGE_CHARS:
        raise invalid(
            ErrorReason.INVALID_MESSAGE,
            f"current_user_message is required and at most {MAX_MESSAGE_CHARS} characters",
        )


async def _retrieve(
    conn: Connection, message: str, extracted_info: dict[str, object], limit: int
) -> list[knowledge_pb2.KnowledgeHit]:
    if limit <= 0:
        return []
    hits: list[knowledge_pb2.KnowledgeHit] = []
    topic = extracted_info.get("topic_node_id")
    if isinstance(topic, str) and topic:
        hits.extend(
            knowledge_pb2.KnowledgeHit(node=node, score=TOPIC_SCORE)
            for node in await knowledge.nodes_by_id(conn, [topic])
        )
    found = await knowledge.search(
        conn, knowledge.query_words(message), limit=limit, min_score=MIN_MESSAGE_HIT_SCORE
    )
    seen = {hit.node.node_id for hit in hits}
    hits.extend(hit for hit in found if hit.node.node_id not in seen)
    return hits[:limit]


_withheld_counter = metrics.get_meter("nemo_context.conversation").create_counter(
    "nemo.context.knowledge.withheld",
    unit="{passage}",
    description="Knowledge passages left out of conversation bundles because the identifier "
    "gate would refuse them.",
)


def _passable_knowledge(
    hits: Sequence[knowledge_pb2.KnowledgeHit], forbidden: frozenset[str], circle: Circle
) -> tuple[list[knowledge_pb2.KnowledgeHit], int]:
    """The hits the gate lets through, and how many it would refuse (logged by rule and node)."""
    kept: list[knowledge_pb2.KnowledgeHit] = []
    for hit in hits:
        finding = find_leak(hit, forbidden_values=forbidden, circle=circle)
        if finding is None:
            kept.append(hit)
            continue
        _withheld_counter.add(1, {"rule": finding.rule})
        logger.warning(
            "knowledge passage withheld from a conversation bundle",
            extra={"gate_rule": finding.rule, "node_id": hit.node.node_id},
        )
    return kept, len(hits) - len(kept)


def _masked(bundle: pb.ConversationBundle, masker: TextMasker) -> None:
    """Mask what a person wrote, and the stored ids and state keys: a key linked to the learner
    after it was stored must not end the session."""
    bundle.current_user_message = masker.text(bundle.current_user_message)
    bundle.conversation_summary = masker.text(bundle.conversation_summary)
    for message in bundle.recent_messages:
        message.content = masker.text(message.content)
        message.message_id = masker.text(message.message_id)
        message.turn_id = masker.text(message.turn_id)
    if bundle.HasField("state"):
        masker.struct(bundle.state.extracted_info)
        masker.struct(bundle.state.agent_state)


def _is_stale(
    history: Sequence[filtering.Turn], included: set[str], covered_through_seq: int
) -> bool:
    return any(
        message.seq > covered_through_seq
        for turn in history
        for message in turn.messages
        if message.message_id not in included
    )


class ConversationBuilder:
    """Assembles gated conversation bundles from PostgreSQL."""

    def __init__(
        self, pool: Pool, pseudonymizer: Pseudonymizer, settings: ConversationSettings
    ) -> None:
        self._pool = pool
        self._pseudonymizer = pseudonymizer
        self._settings = settings

    async def build(
        self, request: service_pb.BuildConversationContextRequest
    ) -> Gated[pb.ConversationBundle]:
        """The gated bundle for one turn; see the module docstring."""
        _validate(request)
        # Looked up on every build: the table ListPurposes serves is the one that decides.
        purpose = purpose_named(TUTOR_CHAT)
        budget = _budget(request, self._settings.default_token_budget)
        learner_id = await store.session_learner(self._pool, request.session_id)
        if learner_id is None:
            raise session_not_found()
        async with learner_transaction(self._pool, [learner_id], readonly=True) as conn:
            session = await store.read_session(
                conn, request.session_id, learner_id, purpose, self._settings.identifier_key
            )
            retrieved = (
                await _retrieve(
                    conn,
                    request.current_user_message,
                    session.extracted_info,
                    self._settings.knowledge_limit,
                )
                if purpose.declares(Slice.KNOWLEDGE)
                else []
            )
        forbidden = session.linked_ids
        knowledge_hits, withheld = _passable_knowledge(retrieved, forbidden, session.circle)
        turns = filtering.group_turns(filtering.reusable_history(session.messages, request.turn_id))
        _, recent = filtering.recent_window(turns, self._settings.recent_turns)
        bundle = _bundle(request, purpose, self._pseudonymizer.learner_ref(learner_id), session)
        bundle.recent_messages.extend(
            message.as_context() for turn in recent for message in turn.messages
        )
        bundle.retrieved_knowledge.extend(knowledge_hits)
        masker = TextMasker(value_matcher(tuple(sorted(forbidden))), session.circle)
        _masked(bundle, masker)
        tokens, _ = trim_to_budget(bundle, budget)
        included = {message.message_id for message in bundle.recent_messages}
        # Trimming may have dropped the summary: then the bundle carries none.
        summary = session.summary if bundle.conversation_summary else None
        bundle.meta.CopyFrom(
            pb.ConversationMeta(
                token_budget=budget,
                estimated_tokens=tokens,
                included_message_count=len(included),
                dropped_message_count=sum(len(turn.messages) for turn in turns) - len(included),
                summary_version=summary.version if summary else 0,
                build_version=BUILD_VERSION,
                summary_stale=_is_stale(
                    turns, included, summary.covers_through_seq if summary else 0
                ),
                withheld_knowledge_count=withheld,
                redactions=masker.redactions(),
            )
        )
        return gate(bundle, forbidden_values=forbidden, circle=session.circle)


def _bundle(
    request: service_pb.BuildConversationContextRequest,
    purpose: Purpose,
    learner_ref: str,
    session: store.SessionRecord,
) -> pb.ConversationBundle:
    """The bundle's identity, the purpose it was built under and the session's declared parts
    (history and knowledge are added by the builder)."""
    bundle = pb.ConversationBundle(
        session_id=request.session_id,
        turn_id=request.turn_id,
        current_user_message=request.current_user_message,
        learner_ref=learner_ref,
        purpose=purpose.name,
        slices=[str(slice_) for slice_ in purpose.slices],
        policy_version=POLICY_VERSION,
    )
    if purpose.declares(Slice.CONVERSATION_SUMMARY) and session.summary is not None:
        bundle.conversation_summary = session.summary.text
    if purpose.declares(Slice.CONVERSATION_STATE):
        bundle.state.CopyFrom(
            pb.ConversationState(
                extracted_info=python_to_struct(session.extracted_info),
                agent_state=python_to_struct(session.agent_state),
            )
        )
    if purpose.declares(Slice.PROFILE):
        bundle.profile.grade = session.grade
        if purpose.declares(Slice.AGE) and session.age_years is not None:
            bundle.profile.age_years = session.age_years
    return bundle


async def build_conversation_context(
    builder: ConversationBuilder,
    snapshots: SnapshotStore,
    request: service_pb.BuildConversationContextRequest,
    learner_id: str,
) -> Gated[pb.ConversationBundle]:
    """BuildConversationContext: the gated bundle, with its snapshot reference when ``persist``
    is set and the snapshot could be written (a failed write returns the bundle without one).
    ``learner_id`` is the session's learner, whose data key seals the snapshot."""
    bundle = await builder.build(request)
    return await with_snapshot(snapshots, bundle, learner_id) if request.persist else bundle
