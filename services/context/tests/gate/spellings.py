"""Spellings, encodings and ordinary text shared by the gate's tests: this directory's own
vocabulary of forbidden concepts, keys and the ways to write them, never read from the gate's
tables."""

from __future__ import annotations

import base64
import html
import random
from typing import Any

from google.protobuf.struct_pb2 import Struct
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from nemo_context.gate import find_leak

LINKED = frozenset(
    {"L-2041-1", "F-2041-1", "U-2041-L1", "U-2041-P1", "U-2041-P4", "U-2041-G1", "U-2041-M1"}
)
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def struct_of(value: dict[str, Any]) -> Struct:
    struct = Struct()
    struct.update(value)
    return struct


def leaks(value: object, forbidden: frozenset[str] = LINKED) -> bool:
    return find_leak(value, forbidden_values=forbidden) is not None


# The test's own vocabulary: concepts a field name must never carry, and names that are fine.

FORBIDDEN_CONCEPTS = [
    ("name",),
    ("display", "name"),
    ("full", "name"),
    ("first", "name"),
    ("last", "name"),
    ("user", "name"),
    ("student", "name"),
    ("guardian", "name"),
    ("parent", "name"),
    ("school", "name"),
    ("email",),
    ("email", "address"),
    ("contact", "email"),
    ("phone",),
    ("phone", "number"),
    ("guardian", "phone"),
    ("address",),
    ("home", "address"),
    ("date", "of", "birth"),
    ("birth", "date"),
    ("birthday",),
    ("dob",),
    ("user", "id"),
    ("learner", "id"),
    ("learner", "ids"),
    ("family", "id"),
    ("student", "id"),
    ("guardian",),
    ("avatar", "url"),
    ("photo",),
    ("profile", "photo"),
    ("photo", "url"),
    ("facebook", "url"),
    ("links", "json"),
    ("ngay", "sinh"),
    ("so", "dien", "thoai"),
]
SAFE_CONCEPTS = [
    ("title",),
    ("node", "title"),
    ("package", "title"),
    ("learner", "ref"),
    ("node", "id"),
    ("topic", "node", "id"),
    ("message", "id"),
    ("turn", "id"),
    ("session", "id"),
    ("grade",),
    ("mastery",),
    ("confidence",),
    ("evidence", "count"),
    ("subject",),
    ("strand",),
    ("photosynthesis",),
    ("phoneme",),
    ("named", "entity"),
    ("pending", "exercise"),
    ("hint", "level"),
    ("node", "name"),
    ("social", "studies"),
]


def case_spellings(words: tuple[str, ...]) -> list[str]:
    camel = words[0] + "".join(word.title() for word in words[1:])
    return [
        "_".join(words),
        "_".join(words).upper(),
        camel,
        camel[0].upper() + camel[1:],
        "-".join(words),
        "".join(words),
        "".join(words).upper(),
        ".".join(words),
    ]


FORBIDDEN_NAME = st.sampled_from(FORBIDDEN_CONCEPTS).flatmap(
    lambda words: st.sampled_from(case_spellings(words))
)
SAFE_NAME = st.sampled_from(SAFE_CONCEPTS).flatmap(
    lambda words: st.sampled_from(case_spellings(words))
)


# Forbidden values: keys in the format the gate can match, and every way to write them.

KEYS = st.from_regex(r"[A-Z]{1,3}-[0-9]{4}-[A-Z]?[0-9]{1,4}", fullmatch=True) | st.sampled_from(
    sorted(LINKED)
)
LOOKALIKES = {
    "A": "\u0410\u0391",
    "B": "\u0412\u0392",
    "C": "\u0421",
    "E": "\u0415\u0395",
    "H": "\u041d\u0397",
    "I": "\u0406\u0399",
    "K": "\u041a\u039a",
    "M": "\u041c\u039c",
    "N": "\u039d",
    "O": "\u041e\u039f",
    "P": "\u0420\u03a1",
    "T": "\u0422\u03a4",
    "X": "\u0425\u03a7",
    "Y": "\u03a5",
    "Z": "\u0396",
    "a": "\u0430",
    "c": "\u0441",
    "e": "\u0435",
    "o": "\u043e\u03bf",
    "p": "\u0440",
    "x": "\u0445",
    "y": "\u0443",
    "0": "\u041e\u039f",
    "1": "\u0406",
}
"""Cyrillic and Greek letters that look like Latin letters and digits."""
DASHES = "\u2010\u2011\u2012\u2013\u2014\u2212\ufe63\uff0d"
INVISIBLE = "\u200b\u200c\u200d\u2060\u00ad\ufeff"


def _full_width(key: str, rng: random.Random) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in key)


def _split_invisibly(key: str, rng: random.Random) -> str:
    cut = rng.randrange(1, len(key))
    return key[:cut] + rng.choice(INVISIBLE) + key[cut:]


def _other_dashes(key: str, rng: random.Random) -> str:
    return "".join(rng.choice(DASHES) if c == "-" else c for c in key)


def _lookalikes(key: str, rng: random.Random) -> str:
    spots = [i for i, c in enumerate(key) if c in LOOKALIKES]
    chosen = rng.sample(spots, k=max(1, len(spots) // 2)) if spots else []
    return "".join(rng.choice(LOOKALIKES[c]) if i in chosen else c for i, c in enumerate(key))


def _other_case(key: str, rng: random.Random) -> str:
    return "".join(c.swapcase() if rng.random() < 0.5 else c for c in key).lower()


def _base64(key: str, rng: random.Random) -> str:
    sentence = rng.choice(["{}", "mã {} nhé", "ref={}", '{{"ref": "{}"}}']).format(key)
    encoded = rng.choice([base64.b64encode, base64.urlsafe_b64encode])(sentence.encode()).decode()
    return encoded.rstrip("=") if rng.random() < 0.5 else encoded


def _percent(key: str, rng: random.Random) -> str:
    def escaped(c: str) -> str:
        return "".join(f"%{byte:02X}" for byte in c.encode())

    return "".join(escaped(c) if c == "-" or rng.random() < 0.3 else c for c in key)


def _html_entities(key: str, rng: random.Random) -> str:
    def reference(c: str) -> str:
        return rng.choice([f"&#{ord(c)};", f"&#x{ord(c):x};", html.escape(c)])

    return "".join(reference(c) if c == "-" or rng.random() < 0.3 else c for c in key)


def _json_escapes(key: str, rng: random.Random) -> str:
    return "".join(f"\\u{ord(c):04x}" if c == "-" else c for c in key)


NORMALISATIONS = [_full_width, _split_invisibly, _other_dashes, _lookalikes, _other_case]
ENCODINGS = [_base64, _percent, _html_entities, _json_escapes]


@st.composite
def key_variants(draw: st.DrawFn, key: str) -> str:
    """``key`` through one to three normalisations, then maybe one encoding."""
    rng = draw(st.randoms(use_true_random=False))
    variant = key
    for spelling in draw(st.lists(st.sampled_from(NORMALISATIONS), min_size=1, max_size=3)):
        variant = spelling(variant, rng)
    if draw(st.booleans()):
        variant = draw(st.sampled_from(ENCODINGS))(variant, rng)
    return variant


AROUND = st.sampled_from(
    [("", ""), ("xem ", "."), ("(", ")"), ("học sinh ", " lớp 8"), ("ref:", ", ok"), ("\n", "\n")]
)


# No false alarms: ordinary teaching text, numbers and node titles.

VI_WORDS = [
    "học",
    "sinh",
    "lớp",
    "em",
    "cô",
    "thầy",
    "bài",
    "tập",
    "phương",
    "trình",
    "hằng",
    "đẳng",
    "thức",
    "phân",
    "số",
    "hệ",
    "số",
    "góc",
    "đường",
    "thẳng",
    "tam",
    "giác",
    "diện",
    "tích",
    "chu",
    "vi",
    "lực",
    "vận",
    "tốc",
    "gia",
    "tốc",
    "nguyên",
    "tử",
    "phân",
    "tử",
    "điện",
    "trở",
    "đúng",
    "sai",
    "ôn",
    "lại",
    "luyện",
    "tập",
    "ví",
    "dụ",
    "hãy",
    "tính",
    "giải",
    "thích",
    "vì",
    "sao",
    "bậc",
    "hai",
    "nghiệm",
    "đồ",
    "thị",
    "hàm",
    "số",
    "xác",
    "suất",
    "thống",
    "kê",
]
EN_WORDS = [
    "the",
    "learner",
    "solves",
    "an",
    "equation",
    "with",
    "two",
    "unknowns",
    "and",
    "checks",
    "each",
    "answer",
    "photosynthesis",
    "probability",
    "mathematics",
    "name",
    "of",
    "the",
    "shape",
    "address",
    "the",
    "question",
    "write",
    "your",
    "email",
    "later",
    "teacher",
    "student",
    "family",
    "school",
    "phone",
    "number",
    # Not "birthday": a birth word next to a date is a birth date (the identifier tests).
    "holiday",
    "guardian",
]
NUMBERS = st.one_of(
    st.integers(0, 2100).map(str),
    st.integers(0, 100).map(lambda n: f"{n}%"),
    st.integers(1, 12).map(lambda n: f"lớp {n}"),
    st.tuples(st.integers(1, 9), st.integers(2, 12)).map(lambda t: f"{t[0]}/{t[1]}"),
    st.floats(0, 1000, allow_nan=False).map(lambda f: f"{f:.2f}"),
    st.tuples(st.integers(1, 28), st.integers(1, 12), st.integers(2000, 2030)).map(
        lambda t: f"{t[0]:02d}/{t[1]:02d}/{t[2]}"
    ),
)
FORMULAS = st.sampled_from(
    [
        "(a + b)² = a² + 2ab + b²",
        "F = m·a",
        "Lực F-1 và F-2",
        "H2SO4 + 2NaOH",
        "CO2",
        "x-1 = 0",
        "2x - 1 = 0",
        "\\frac{1}{2} + \\sqrt[3]{x}",
        "[a; b]",
        "A & B",
        "Q&A",
        "v = s/t",
        "E=mc²",
        "U = I·R",
        "x ∈ [0; 1]",
        "COVID-19",
        "ISO-9001",
    ]
)
LABELS = st.sampled_from(["Ví dụ: ", "Chú ý: ", "Example: ", "Hint: ", "Answer: ", "Bài 1: ", ""])
QUOTED = st.sampled_from(
    ['"photosynthesis"', "'ẩn số'", '{"x": 1, "y": 2}', '{"title": "Bài 1", "score": 9}', "“gói”"]
)
SENTENCE = st.builds(
    lambda label, words, extras: label + " ".join(words + extras) + ".",
    LABELS,
    st.lists(st.sampled_from(VI_WORDS + EN_WORDS), min_size=1, max_size=15),
    st.lists(st.one_of(NUMBERS, FORMULAS, QUOTED), max_size=4),
)
NODE_TITLES = st.sampled_from(
    [
        "Hằng đẳng thức",
        "Hệ số góc",
        "Định lý Ta-lét",
        "Phương trình bậc hai",
        "Lực F-1",
        "Xác suất thực nghiệm",
        "Phân số",
        "Hiệu ứng quang điện",
        "Unit 8: Films",
        "Mol và khối lượng mol",
        "Axit H2SO4",
    ]
)
