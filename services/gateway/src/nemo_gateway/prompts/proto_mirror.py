"""Results that mirror their proto message field by field convert without a hand-written mapper.

A mirroring model has exactly its message's field names, and each field that holds models (one,
or a tuple of them) mirrors that field's message type in turn. :func:`mismatches` says where a
model does not mirror its message; the registry refuses such a prompt when it is built, so a
field added on one side only fails at import, not on a client.
"""

from __future__ import annotations

import typing
from typing import TypeVar

from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message
from pydantic import BaseModel

M = TypeVar("M", bound=Message)


def mirrored(model: BaseModel, message_type: type[M]) -> M:
    """The message with the model's values; nested models become nested messages."""
    return message_type(**model.model_dump())


def _nested_model(annotation: object) -> type[BaseModel] | None:
    """The model type a field holds, alone or as ``tuple[Model, ...]``; None for plain values."""
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def mismatches(model_type: type[BaseModel], descriptor: Descriptor) -> list[str]:
    """Where the model does not mirror the message, as ``Model.field`` phrases; empty if it does."""
    model_fields = model_type.model_fields
    problems = [
        f"{model_type.__name__}.{name} is not in {descriptor.name}"
        for name in model_fields
        if name not in descriptor.fields_by_name
    ] + [
        f"{descriptor.name}.{name} is not in {model_type.__name__}"
        for name in descriptor.fields_by_name
        if name not in model_fields
    ]
    for name, info in model_fields.items():
        field = descriptor.fields_by_name.get(name)
        if field is None:
            continue
        nested = _nested_model(info.annotation)
        if field.message_type is None:
            if nested is not None:
                problems.append(f"{model_type.__name__}.{name} holds a model, not a value")
        elif nested is None:
            problems.append(f"{model_type.__name__}.{name} holds a value, not a model")
        else:
            problems += mismatches(nested, field.message_type)
    return problems
