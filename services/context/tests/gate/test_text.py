"""How the gate reads text: look-alike characters, string escapes, percent escapes, base64 runs
and keys written in text, each at the edges where a plausible slip would change the verdict.

The cases are this file's own (a key, its spellings and the names a writer would use), never
read from the gate's tables.
"""

from __future__ import annotations

import base64
import json

import pytest

from nemo_context.gate import find_forbidden_name, find_leak
from nemo_context.gate.text import text_keys

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
