"""The language of a prompt and of its output: vocabulary every layer of the gateway names."""

from __future__ import annotations

from enum import StrEnum

from nemo_protos.type.v1 import locale_pb2


class Lang(StrEnum):
    """Language of a prompt and of its output."""

    VI = "vi"
    EN = "en"

    @classmethod
    def from_proto(cls, locale: int) -> Lang:
        """LOCALE_EN is English; unspecified means the platform default, Vietnamese."""
        return cls.EN if locale == locale_pb2.LOCALE_EN else cls.VI

    def to_proto(self) -> locale_pb2.Locale.ValueType:
        return locale_pb2.LOCALE_EN if self is Lang.EN else locale_pb2.LOCALE_VI
