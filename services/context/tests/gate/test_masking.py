"""Text a person wrote is masked with the gate's own matcher: keys in any spelling, forbidden field
names and the values written after them are masked, the rest of the message is kept."""

from __future__ import annotations

import base64
from collections import Counter
from typing import Any

import pytest
from google.protobuf.api_pb2 import Api
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct, Value
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nemo_context.gate import find_leak
from nemo_context.gate.identifiers import NO_CIRCLE
from nemo_context.gate.masking import (
    ENCODED_MASK,
    FIELD_MASK,
    ID_MASK,
    OMITTED,
    VALUE_MASK,
    TextMasker,
    _plan,
    mask_text,
)
from nemo_context.gate.text import value_matcher
from nemo_protos.context.v1 import conversation_pb2 as chat

from .circles import Person, circle_of

FORBIDDEN = frozenset({"L-2041-1", "U-2041-P1", "F-2041-1"})


def redact_chat_text(text: str, forbidden: frozenset[str]) -> str:
    masked, _ = mask_text(text, value_matcher(tuple(sorted(forbidden))), NO_CIRCLE)
    return masked


def _clean(text: str) -> bool:
    return find_leak(text, forbidden_values=FORBIDDEN) is None


def test_keys_are_masked_in_any_spelling_on_token_boundaries() -> None:
    text = (
        "Mã của em là l-2041-1, mẹ em là \uff35\uff0d2041\u2013P1 "
        "(gia đình F\u200b-2041-1). Bạn L-2041-10 thì khác."
    )
    masked = redact_chat_text(text, FORBIDDEN)
    assert masked == (
        f"Mã của em là {ID_MASK}, mẹ em là {ID_MASK} (gia đình {ID_MASK}). Bạn L-2041-10 thì khác."
    )
    assert _clean(masked)
    assert not _clean(text)


def test_text_without_keys_is_unchanged() -> None:
    text = 'Em tên là An, em học lớp 8. Ví dụ: {"x": 1} và 35%.'
    assert redact_chat_text(text, FORBIDDEN) == text
    assert redact_chat_text(text, frozenset()) == text


def test_forbidden_names_and_their_values_are_masked_and_the_rest_kept() -> None:
    text = 'Từ mới: "name": "An", "node_title": "Phân số", "userId":1, \'phone\': \'0912\' ok'
    redacted = redact_chat_text(text, FORBIDDEN)
    assert redacted == (
        f'Từ mới: {FIELD_MASK}: {VALUE_MASK}, "node_title": "Phân số", '
        f"{FIELD_MASK}:{VALUE_MASK}, {FIELD_MASK}: {VALUE_MASK} ok"
    )
    assert _clean(redacted)
    assert redact_chat_text("email: an@example.com\nCảm ơn cô", FORBIDDEN) == (
        f"{FIELD_MASK}: {VALUE_MASK}\nCảm ơn cô"
    )


def test_the_placeholders_a_model_reads_are_written_out() -> None:
    # A model is told what each placeholder means; the words are the contract, spelled out here.
    text = "mã L-2041-1 và TC0yMDQxLTE= nhé\nemail: an@example.com\nxong"
    assert redact_chat_text(text, FORBIDDEN) == (
        "mã [id removed] và [encoded id removed] nhé\n[field removed]: [value removed]\nxong"
    )
    refused = "Ghi chú:\n%2565mail : Nguyen Van A"
    assert redact_chat_text(refused, FORBIDDEN) == "[message removed: it could not be shown safely]"


def test_encoded_keys_and_names_are_masked_where_they_are() -> None:
    hidden = base64.b64encode(b"L-2041-1").decode()
    assert redact_chat_text(f"mã {hidden} nhé", FORBIDDEN) == f"mã {ENCODED_MASK} nhé"
    assert redact_chat_text('{"ref": "L\\u002d2041\\u002d1"}', FORBIDDEN) == (
        f'{{"ref": "{ENCODED_MASK}"}}'
    )
    assert redact_chat_text("?id=L%2D2041%2D1&x=1 xong", FORBIDDEN) == f"{ENCODED_MASK} xong"
    nested = '{"note": "{\\"email\\": \\"an@example.com\\"}"} cảm ơn'
    redacted = redact_chat_text(nested, FORBIDDEN)
    assert redacted != OMITTED
    assert redacted.endswith("cảm ơn")
    assert _clean(redacted)
    assert redact_chat_text('{"ref": "L\\u002d2041\\u002d10"}', FORBIDDEN) == (
        '{"ref": "L\\u002d2041\\u002d10"}'
    )


def test_a_chunk_with_percent_escapes_that_are_not_utf_8_is_masked_when_it_holds_a_key() -> None:
    assert redact_chat_text("xem %FF%4C%2D2041%2D1 nhé", FORBIDDEN) == f"xem {ENCODED_MASK} nhé"
    assert redact_chat_text("xem %FF lớp 8", FORBIDDEN) == "xem %FF lớp 8"


_WORDS = st.lists(
    st.sampled_from(
        [
            "em",
            "cô",
            "học",
            "bài",
            "phân",
            "số",
            "hằng",
            "đẳng",
            "thức",
            "lớp",
            "8",
            "ví",
            "dụ:",
            "35%",
            "(a+b)²",
            "nhé",
            "ạ",
        ]
    ),
    min_size=1,
    max_size=8,
).map(" ".join)
_PLANTED = st.sampled_from(
    [
        "L-2041-1",
        "u-2041-p1",
        "F\u20132041\u20131",
        "\uff2c\uff0d\uff12\uff10\uff14\uff11\uff0d\uff11",
        base64.b64encode(b"U-2041-P1").decode(),
        "L%2D2041%2D1",
        "L&#45;2041&#x2d;1",
        '"email": "an@example.com"',
        "'phone_number': '0912 345 678'",
        '{"guardianName": "Lan"}',
    ]
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(before=_WORDS, planted=st.lists(_PLANTED, min_size=1, max_size=3), after=_WORDS)
def test_redaction_never_removes_the_whole_message_and_says_what_it_removed(
    before: str, planted: list[str], after: str
) -> None:
    text = f"{before} {' và '.join(planted)} {after}"
    redacted = redact_chat_text(text, FORBIDDEN)
    assert _clean(redacted)
    assert redacted != OMITTED
    assert redacted.startswith(before)
    assert redacted.endswith(after)
    assert any(mask in redacted for mask in (ID_MASK, ENCODED_MASK, FIELD_MASK))


ENCODED_KEYS = {
    "percent": lambda key: "".join(f"%{byte:02X}" for byte in key.encode()),
    "html": lambda key: "".join(f"&#{ord(char)};" for char in key),
    "escapes": lambda key: "".join(f"\\u{ord(char):04x}" for char in key),
}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    key=st.sampled_from(["email", "phone", "address", "fullName", "họ_tên", "ngày_sinh"]),
    encoding=st.sampled_from(sorted(ENCODED_KEYS)),
    value=st.sampled_from(["Nguyen Van A", "Lê Thị B", "hai mươi", "x-y-z"]),
)
def test_an_encoded_key_takes_its_value_with_it(key: str, encoding: str, value: str) -> None:
    text = f"Ghi chú:\n{ENCODED_KEYS[encoding](key)}: {value}\nCảm ơn cô"
    masked, counts = mask_text(text, value_matcher(()), NO_CIRCLE)
    assert value not in masked, masked
    assert masked.endswith("\nCảm ơn cô")
    assert counts["field"] + counts["key"] >= 1


def test_a_chunk_that_decodes_to_fields_takes_the_value_after_its_last_name() -> None:
    # "email=An;name", the last name cut from its colon by a space (or written with no space
    # after the colon): the value after the colon goes with the chunk, and only it.
    chunk = "%65mail=An;%6Eame"
    text = f"{chunk} :Nguyen Van A\n{chunk} : Le Thi B\nCảm ơn cô"
    masked, counts = mask_text(text, value_matcher(()), NO_CIRCLE)
    assert masked == f"{ENCODED_MASK} :{VALUE_MASK}\n{ENCODED_MASK} : {VALUE_MASK}\nCảm ơn cô"
    assert counts == Counter({"key": 2})


def test_a_chunk_that_decodes_to_fields_with_no_colon_after_it_takes_nothing_after_it() -> None:
    chunk = "%65mail=An;%6Eame"
    assert redact_chat_text(f"{chunk} nhé cô", FORBIDDEN) == f"{ENCODED_MASK} nhé cô"
    assert redact_chat_text(f"Ghi chú:\n{chunk}", FORBIDDEN) == f"Ghi chú:\n{ENCODED_MASK}"


def test_an_encoded_key_with_no_value_after_it_is_masked_alone() -> None:
    for text in ("Ghi chú:\n%65mail:", "Ghi chú:\n%65mail: ", "Ghi chú:\n%65mail: , ok"):
        masked = redact_chat_text(text, FORBIDDEN)
        assert masked == text.replace("%65mail:", ENCODED_MASK)


def test_an_encoded_key_with_a_full_width_colon_takes_its_value_with_it() -> None:
    for colon in ("\uff1a", "\uff1d"):
        text = f"%65mail{colon} Nguyen Van A\nCảm ơn cô"
        assert redact_chat_text(text, FORBIDDEN) == f"{ENCODED_MASK} {VALUE_MASK}\nCảm ơn cô"


def test_a_key_its_encoding_parts_from_its_colon_is_masked_in_the_decoded_text() -> None:
    # "%65mail" alone is no key, so the text is masked as it reads decoded; what the first
    # masking counted is not counted twice.
    text = "mã L-2041-1\n%65mail : Nguyen Van A\nCảm ơn cô"
    masked, counts = mask_text(text, value_matcher(tuple(sorted(FORBIDDEN))), NO_CIRCLE)
    assert masked == f"mã {ID_MASK}\n{FIELD_MASK} : {VALUE_MASK}\nCảm ơn cô"
    assert counts == Counter({"key": 1, "field": 1})
    assert _clean(masked)


def test_text_the_gate_still_refuses_once_masked_is_removed_whole_and_counted_once() -> None:
    # Encoded twice and parted from its colon: the key is in neither the text nor its decoding.
    text = "Ghi chú:\n%2565mail : Nguyen Van A\nCảm ơn cô"
    assert not _clean(text)
    assert mask_text(text, value_matcher(()), NO_CIRCLE) == (OMITTED, Counter({"whole_text": 1}))


def test_every_string_of_a_state_is_masked_in_nested_structs_and_lists() -> None:
    state = Struct()
    state.update(
        {
            "ghi_chu": {"lan_truoc": "mã L-2041-1 nhé", "so_lan": 2},
            "cac_buoc": ["bước 1", "mã L-2041-1", ["L-2041-1"], {"ma": "L-2041-1"}],
            "xong": True,
            "email": "an@example.com",
            "ho_so": {"L-2041-1": "đã xong"},
        }
    )
    masker = TextMasker(value_matcher(tuple(sorted(FORBIDDEN))), NO_CIRCLE)
    masker.struct(state)
    # An entry whose key is a forbidden name or holds a key is removed, and counted as a field.
    assert MessageToDict(state) == {
        "ghi_chu": {"lan_truoc": f"mã {ID_MASK} nhé", "so_lan": 2},
        "cac_buoc": ["bước 1", f"mã {ID_MASK}", [ID_MASK], {"ma": ID_MASK}],
        "xong": True,
        "ho_so": {},
    }
    assert masker.counts == Counter({"key": 4, "field": 2})


def test_a_wanted_field_is_masked_in_every_message_of_a_repeated_field() -> None:
    bundle = chat.ConversationBundle(
        recent_messages=[
            chat.ConversationMessage(content="mã L-2041-1", message_id="m-1"),
            chat.ConversationMessage(content="mẹ em là U-2041-P1 ạ", message_id="m-2"),
        ]
    )
    masker = TextMasker(value_matcher(tuple(sorted(FORBIDDEN))), NO_CIRCLE)
    masker.fields(bundle, ["nemo.context.v1.ConversationMessage.content"])
    assert [m.content for m in bundle.recent_messages] == [
        f"mã {ID_MASK}",
        f"mẹ em là {ID_MASK} ạ",
    ]
    assert [m.message_id for m in bundle.recent_messages] == ["m-1", "m-2"]
    assert masker.counts == Counter({"key": 2})


def _base64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_contact_data_encoded_as_deep_as_the_gate_reads_is_masked_where_it_stands(
    layers: int,
) -> None:
    phone = "0912 345 678"
    for _ in range(layers):
        phone = _base64(phone)
    masked, counts = mask_text(f"số mẹ: {phone} nhé", value_matcher(()), NO_CIRCLE)
    assert masked == "số mẹ: [phone] nhé"
    assert counts == Counter({"phone": 1})


KEYS = value_matcher(tuple(sorted(FORBIDDEN)))


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ('{"phone": "", "lop": "8A"}', '{[field removed]: [value removed], "lop": "8A"}'),
        ('{"phone": "09\\"12", "lop": "8A"}', '{[field removed]: [value removed], "lop": "8A"}'),
        ('{"phone": "a\\"b\\"c", "lop": 8}', '{[field removed]: [value removed], "lop": 8}'),
        ('{"phone": "\\\\", "lop": "8A"}', '{[field removed]: [value removed], "lop": "8A"}'),
        ('{"phone": "0912', "{[field removed]: [value removed]"),
        ('{"phone": "0912\\', "{[field removed]: [value removed]"),
        ('{"phone": "0912\nCảm ơn cô', "{[field removed]: [value removed]\nCảm ơn cô"),
        ("{'phone': '0912', 'lop': '8A'}", "{[field removed]: [value removed], 'lop': '8A'}"),
        ("ghi chú\nemail:", "ghi chú\n[field removed]:"),
        ("ghi chú\nemail:   ", "ghi chú\n[field removed]:   "),
        ('{"phone":, "lop": 8}', '{[field removed]:, "lop": 8}'),
    ],
)
def test_a_field_value_is_masked_to_its_end_and_no_further(text: str, masked: str) -> None:
    # Quoted values end at their closing quote (escaped quotes inside), or where a line break
    # cuts them short; an empty value adds no mask.
    assert mask_text(text, KEYS, NO_CIRCLE) == (masked, Counter({"field": 1}))


def test_a_value_holding_an_identifier_is_masked_as_a_value_and_counted_once() -> None:
    # The value runs past the e-mail address in it: one mask over the whole value.
    text = "email: an@example.com nhé\nCảm ơn cô"
    assert mask_text(text, KEYS, NO_CIRCLE) == (
        "[field removed]: [value removed]\nCảm ơn cô",
        Counter({"field": 1}),
    )


def test_a_key_encoded_as_deep_as_the_gate_reads_is_masked_where_it_stands() -> None:
    key = "L-2041-1"
    for _ in range(3):
        key = _base64(key)
    assert mask_text(f"mã {key} nhé", KEYS, NO_CIRCLE) == (
        f"mã {ENCODED_MASK} nhé",
        Counter({"key": 1}),
    )


def _plan_names(descriptor: Any, wanted: frozenset[str]) -> list[tuple[str, bool]]:
    return [(field.name, text) for field, text in _plan(descriptor, wanted)]


def test_the_fields_walked_for_written_text_are_those_that_can_hold_it() -> None:
    string_value = frozenset({"google.protobuf.Value.string_value"})
    # A type that holds itself (through ListValue) may hold the text at any depth.
    assert _plan_names(Value.DESCRIPTOR, string_value) == [
        ("string_value", True),
        ("list_value", False),
    ]
    # Other string fields are not walked; a map is never read.
    assert _plan_names(Value.DESCRIPTOR, frozenset()) == [("list_value", False)]
    # A type met in one branch that holds nothing wanted is not walked in the next.
    assert _plan_names(Api.DESCRIPTOR, frozenset()) == []
    assert _plan_names(Api.DESCRIPTOR, frozenset({"google.protobuf.Any.type_url"})) == [
        ("methods", False),
        ("options", False),
    ]


def test_each_kind_of_identifier_has_its_placeholder_written_out() -> None:
    circle = circle_of([Person("Phạm Khuê", school="Lê Quý Đôn")])
    text = (
        "bạn Khuê ở trường Lê Quý Đôn, nhà 12 Lê Lợi, phường 5, sinh ngày 2/5/2014, "
        "gọi 0912 345 678 hoặc an@example.com"
    )
    masked, _ = mask_text(text, KEYS, circle)
    assert masked == (
        "bạn [name] ở [school], nhà [address], sinh ngày [birth date], gọi [phone] hoặc [email]"
    )
