"""How the gate reads text: look-alike characters, string escapes, percent escapes, base64 runs
and keys written in text, each at the edges where a plausible slip would change the verdict.

The cases are this file's own (a key, its spellings and the names a writer would use), never
read from the gate's tables.
"""

from __future__ import annotations

import base64
import json
import unicodedata

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from nemo_context.gate import find_forbidden_name, find_leak
from nemo_context.gate.text import text_keys
from nemo_core.identifiers import is_key
from nemo_protos.context.v1 import knowledge_pb2
from nemo_protos.context.v1 import learner_context_pb2 as pb

from .spellings import (
    AROUND,
    KEYS,
    LINKED,
    NODE_TITLES,
    NUMBERS,
    PROPERTY,
    SENTENCE,
    key_variants,
    leaks,
)

KEY = "L-2041-1"
FORBIDDEN = frozenset({KEY})
ESCAPED_KEY = "".join(f"\\u{ord(char):04x}" for char in KEY)
"""The key as JSON writes it with every character escaped: the gate sees it only decoded."""


def _blocked(text: str) -> bool:
    return find_leak(text, forbidden_values=FORBIDDEN) is not None


# Look-alikes.


def test_right_to_left_letters_that_look_like_digits_are_read_as_the_digits() -> None:
    # Hebrew samekh and Arabic heh look like 0, Hebrew vav and Arabic alef like 1.
    assert _blocked("xem L-2\u05e141-\u05d5 nhé")
    assert _blocked("xem L-2\u064741-\u0627 nhé")
    assert not _blocked("xem L-2\u05e141-\u05d57 nhé")  # still a longer key


# String escapes.


def test_every_kind_of_string_escape_is_decoded() -> None:
    assert _blocked(ESCAPED_KEY)
    assert _blocked("\\U0000004c-2041-1")  # eight hex digits
    assert _blocked("\\x4c-2041-1")
    assert _blocked("{\\'ref\\': \\'L\\u002d2041\\u002d1\\'}")


@pytest.mark.parametrize("control", ["n", "r", "t", "b", "f"])
def test_an_escaped_control_character_separates_like_the_character_itself(control: str) -> None:
    # Decoded, it is a boundary after the key; dropped, the key would run into the next word.
    assert _blocked(f"{ESCAPED_KEY}\\{control}8A")
    assert not _blocked(f"{ESCAPED_KEY}8A")


def test_escapes_past_the_last_code_point_stand_for_nothing() -> None:
    assert _blocked("L-2041\\U00110000-1")
    assert not _blocked("L-2041\\U0010ffff-1")  # the last code point is a character


def test_half_of_an_escaped_surrogate_pair_does_not_stop_the_reading() -> None:
    # JSON writes an emoji as two escapes; each half alone is a lone surrogate once decoded.
    text = json.dumps(f"\U0001f600 {KEY}").replace("-", "\\u002d")
    assert "\\ud83d" in text
    assert _blocked(text)
    assert _blocked(f"\\ud83d {ESCAPED_KEY}")
    assert not _blocked("\\ud83d lớp 8")


# Percent escapes and base64.


def test_percent_escapes_that_are_not_utf_8_are_read_around() -> None:
    assert _blocked("%FF %4C%2D2041%2D1")
    assert _blocked("%C3 xem L%2D2041%2D1")
    assert not _blocked("%FF lớp 8")


def test_a_base64_run_one_character_too_long_is_read_without_it() -> None:
    encoded = base64.b64encode(b"xem L-2041-1").decode()
    assert len(encoded) % 4 == 0  # so one more character cannot be part of the encoding
    for stray in ("A", "A=", "Q"):
        assert _blocked(f"ref {encoded}{stray} ok"), stray
    assert not _blocked(f"ref {base64.b64encode(b'xem L-2041-12').decode()} ok")


# Keys written in text.


NAMES = ['it\'s "quoted"', "back\\slash", "tab\there", "điểm", "zero\u200bwidth", "plain"]
"""Names whose quoted forms need escapes, non-ASCII letters or nothing special."""


@pytest.mark.parametrize("name", NAMES)
def test_a_quoted_key_reads_as_the_name_its_writer_wrote(name: str) -> None:
    for written in (
        json.dumps({name: 1}),
        json.dumps({name: 1}, ensure_ascii=False),
        repr({name: 1}),
    ):
        assert [key.name for key in text_keys(written)] == [name], written


def test_an_escaped_key_in_a_row_is_read_decoded() -> None:
    # Rows are read as written (no decoding), so only the key's own escapes can reveal it.
    assert find_forbidden_name({"note": '{"ph\\u006fne": "x"}'}) is not None
    assert find_forbidden_name({"note": '{"node\\u005fid": "x"}'}) is None


def test_a_colon_deep_in_a_long_line_does_not_hide_the_keys_after_it() -> None:
    prose = "Ghi chú của cô giáo về buổi học hôm nay rất dài và chi tiết cho cả lớp đọc như sau: ổn"
    assert prose.index(":") > 80  # and nothing before it in the line starts a key
    assert _blocked(f"{prose}\nemail: an@example.com")
    assert _blocked(f"{prose}; phone = 0912")
    assert not _blocked(f"{prose}\nnode: math-08-slope")


@PROPERTY
@given(data=st.data())
def test_every_spelling_and_encoding_of_a_key_is_found(data: st.DataObject) -> None:
    key = data.draw(KEYS)
    assert is_key(key)
    variant = data.draw(key_variants(key))
    before, after = data.draw(AROUND)
    text = f"{before}{variant}{after}"
    assert leaks(text, frozenset({key})), ascii(text)


# Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt), assigned or not: a renderer
# shows none of them, so any of them can split a key unseen.
DEFAULT_IGNORABLE_RANGES = [
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
]  # fmt: skip
DEFAULT_IGNORABLE = st.one_of(
    [st.integers(first, last).map(chr) for first, last in DEFAULT_IGNORABLE_RANGES]
)


@PROPERTY
@given(key=KEYS, ignorable=DEFAULT_IGNORABLE, data=st.data())
def test_a_key_split_by_any_default_ignorable_code_point_is_found(
    key: str, ignorable: str, data: st.DataObject
) -> None:
    cut = data.draw(st.integers(1, len(key) - 1))
    assert leaks(f"xem {key[:cut]}{ignorable}{key[cut:]} nhé", frozenset({key}))


@pytest.mark.parametrize(("first", "last"), DEFAULT_IGNORABLE_RANGES)
def test_both_ends_of_every_default_ignorable_range_split_no_key(first: int, last: int) -> None:
    for code in (first, last):
        assert leaks(f"L-2041{chr(code)}-1", LINKED), hex(code)


def _ignorable(code: int) -> bool:
    return any(first <= code <= last for first, last in DEFAULT_IGNORABLE_RANGES)


@pytest.mark.parametrize(("first", "last"), DEFAULT_IGNORABLE_RANGES)
def test_the_characters_next_to_every_default_ignorable_range_still_keep_a_key_apart(
    first: int, last: int
) -> None:
    # Format characters (category Cf) are invisible by definition and removed too.
    for code in (first - 1, last + 1):
        if not _ignorable(code) and unicodedata.category(chr(code)) != "Cf":
            assert not leaks(f"L-2041{chr(code)}-1", LINKED), hex(code)


@PROPERTY
@given(key=KEYS, suffix=st.sampled_from(["0", "7", "x", "A9"]))
def test_a_longer_key_that_starts_with_a_key_passes(key: str, suffix: str) -> None:
    assert not leaks(f"xem {key}{suffix} nhé", frozenset({key}))
    assert not leaks(f"x{key} nhé", frozenset({key}))


@PROPERTY
@given(
    text=st.lists(st.one_of(SENTENCE, NODE_TITLES, NUMBERS), min_size=1, max_size=6).map("\n".join),
    keys=st.lists(KEYS, max_size=6),
)
def test_ordinary_teaching_text_numbers_and_titles_pass(text: str, keys: list[str]) -> None:
    forbidden = LINKED | set(keys)
    assume(all(key not in text for key in forbidden))
    assert find_leak(text, forbidden_values=forbidden) is None, text
    bundle = pb.ContextBundle(rendered_text=text, goal=pb.Goal(title=text))
    bundle.mastery.add(node_id="math-08-slope", node_title=text)
    assert find_leak(bundle, forbidden_values=forbidden) is None
    hit = knowledge_pb2.KnowledgeHit(node=knowledge_pb2.KnowledgeNode(title=text, description=text))
    assert find_leak(hit, forbidden_values=forbidden) is None
