"""Which stored messages may be reused as context, and which of them form the recent window.

The rules of the conversation builder, in order (a message must pass all of them):

1. it belongs to an earlier turn: the current turn's messages are never history (its user
   message arrives separately, as ``current_user_message``);
2. it is ``completed``: pending, failed, partial (a stream cut mid-reply) and cancelled messages
   are never reliable context, whoever wrote them;
3. it is not a UI event (typing, phase changes): those are not conversation;
4. it is not a ``system`` message: instructions of an earlier turn are that turn's, and replaying
   them as history would let stale instructions steer the next reply;
5. a tool result is reused only through its short ``tool_summary``; one without a summary is left
   out rather than sending the full result.

The recent window is then the last N turns that kept at least one message.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from nemo_context.conversation.messages import StoredMessage


def is_reusable(message: StoredMessage, current_turn_id: str) -> bool:
    """Whether ``message`` may appear in the history of ``current_turn_id``."""
    if message.turn_id == current_turn_id:
        return False
    if message.status != "completed":
        return False
    if message.type == "ui_event" or message.role == "system":
        return False
    return not (message.type == "tool_result" and not message.tool_summary)


def reusable_history(
    messages: Iterable[StoredMessage], current_turn_id: str
) -> list[StoredMessage]:
    """The reusable messages, oldest first."""
    return sorted(
        (message for message in messages if is_reusable(message, current_turn_id)),
        key=lambda message: message.seq,
    )


@dataclass(frozen=True)
class Turn:
    """The reusable messages of one earlier turn, oldest first."""

    turn_id: str
    messages: tuple[StoredMessage, ...]

    @property
    def last_seq(self) -> int:
        return self.messages[-1].seq


def group_turns(history: Sequence[StoredMessage]) -> list[Turn]:
    """Reusable messages grouped by turn, turns in the order they started."""
    grouped: dict[str, list[StoredMessage]] = {}
    for message in history:
        grouped.setdefault(message.turn_id, []).append(message)
    return [Turn(turn_id, tuple(messages)) for turn_id, messages in grouped.items()]


def recent_window(turns: Sequence[Turn], size: int) -> tuple[list[Turn], list[Turn]]:
    """``(older, recent)``: the last ``size`` turns and the ones before them."""
    cut = max(len(turns) - size, 0)
    return list(turns[:cut]), list(turns[cut:])
