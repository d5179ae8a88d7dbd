"""A Python enum and the generated proto enum it stands for, matched by member name
(``Mode.READ`` is ``TOOL_MODE_READ``), so no hand-written map has to be kept in step with either.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from google.protobuf.internal.enum_type_wrapper import _EnumTypeWrapper

_Value = TypeVar("_Value", bound=int)
_Member = TypeVar("_Member", bound=Enum)


def to_proto(proto: _EnumTypeWrapper[_Value], prefix: str, member: Enum) -> _Value:
    """The value of ``proto`` named ``prefix`` + the member's name; ValueError when it has none."""
    return proto.Value(prefix + member.name)


def from_proto(
    proto: _EnumTypeWrapper[_Value], prefix: str, python: type[_Member], value: _Value
) -> _Member | None:
    """The member of ``python`` named after ``value`` without ``prefix``; None for the zero value,
    a number this build does not know (proto3 enums are open), or a value with no member."""
    try:
        name = proto.Name(value)
    except ValueError:
        return None
    return python.__members__.get(name.removeprefix(prefix))
