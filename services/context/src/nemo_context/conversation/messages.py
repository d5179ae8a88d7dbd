"""Chat messages as stored, and the one mapping between stored words and proto enum values."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, TypeAlias

from nemo_protos.context.v1 import conversation_pb2 as pb

Role: TypeAlias = pb.MessageRole.ValueType
Type: TypeAlias = pb.MessageType.ValueType
Status: TypeAlias = pb.MessageStatus.ValueType

ROLES: Final[Mapping[Role, str]] = MappingProxyType(
    {
        pb.MESSAGE_ROLE_USER: "user",
        pb.MESSAGE_ROLE_ASSISTANT: "assistant",
        pb.MESSAGE_ROLE_TOOL: "tool",
        pb.MESSAGE_ROLE_SYSTEM: "system",
    }
)
TYPES: Final[Mapping[Type, str]] = MappingProxyType(
    {
        pb.MESSAGE_TYPE_TEXT: "text",
        pb.MESSAGE_TYPE_TOOL_RESULT: "tool_result",
        pb.MESSAGE_TYPE_UI_EVENT: "ui_event",
    }
)
STATUSES: Final[Mapping[Status, str]] = MappingProxyType(
    {
        pb.MESSAGE_STATUS_PENDING: "pending",
        pb.MESSAGE_STATUS_COMPLETED: "completed",
        pb.MESSAGE_STATUS_FAILED: "failed",
        pb.MESSAGE_STATUS_PARTIAL: "partial",
        pb.MESSAGE_STATUS_CANCELLED: "cancelled",
    }
)
_ROLE_OF: Final = {word: value for value, word in ROLES.items()}
_TYPE_OF: Final = {word: value for value, word in TYPES.items()}


@dataclass(frozen=True)
class StoredMessage:
    """One row of ``learning.chat_messages`` (stored words, not enum values)."""

    message_id: str
    turn_id: str
    seq: int
    role: str
    type: str
    status: str
    content: str
    tool_summary: str | None = None

    def as_context(self) -> pb.ConversationMessage:
        """The message as a bundle carries it; a tool result carries only its summary."""
        content = (self.tool_summary or "") if self.type == "tool_result" else self.content
        return pb.ConversationMessage(
            message_id=self.message_id,
            turn_id=self.turn_id,
            role=_ROLE_OF[self.role],
            type=_TYPE_OF[self.type],
            content=content,
        )
