"""Python enums meet their generated proto enums by member name, both ways."""

from __future__ import annotations

from enum import Enum

import pytest

from nemo_core.proto_enums import from_proto, to_proto
from nemo_protos.type.v1 import locale_pb2


class Language(Enum):
    VI = "vi"
    EN = "en"


class Unknown(Enum):
    FR = "fr"


def test_a_member_is_the_proto_value_of_its_name() -> None:
    assert to_proto(locale_pb2.Locale, "LOCALE_", Language.VI) == locale_pb2.LOCALE_VI
    assert to_proto(locale_pb2.Locale, "LOCALE_", Language.EN) == locale_pb2.LOCALE_EN
    with pytest.raises(ValueError, match="LOCALE_FR"):
        to_proto(locale_pb2.Locale, "LOCALE_", Unknown.FR)


def test_a_proto_value_is_the_member_of_its_name_or_none() -> None:
    assert from_proto(locale_pb2.Locale, "LOCALE_", Language, locale_pb2.LOCALE_EN) is Language.EN
    assert from_proto(locale_pb2.Locale, "LOCALE_", Language, locale_pb2.LOCALE_UNSPECIFIED) is None
    # proto3 enums are open: a number this build does not know is no member.
    assert (
        from_proto(locale_pb2.Locale, "LOCALE_", Language, locale_pb2.Locale.ValueType(99)) is None
    )
    assert from_proto(locale_pb2.Locale, "LOCALE_", Unknown, locale_pb2.LOCALE_VI) is None
