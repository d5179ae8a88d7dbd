"""The identifier gate: forbidden names by meaning, forbidden values however spelled or encoded,
no false alarms on ordinary text, and Gated values.

The cases come from this file's own vocabulary of forbidden concepts, spellings and encodings,
never from the gate's rule tables.
"""

from __future__ import annotations

import base64
import html
import json
import logging
import random
import unicodedata
from typing import Any
from urllib.parse import quote

import grpc
import pytest
from google.protobuf.struct_pb2 import Struct
from google.rpc import error_details_pb2
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from nemo_context.gate import Gated, find_forbidden_name, find_leak, gate, is_forbidden_name
from nemo_context.render import render_bundle
from nemo_core.errors import ServiceError
from nemo_core.identifiers import is_key
from nemo_core.telemetry import attach_metric_reader
from nemo_protos.context.v1 import conversation_pb2, knowledge_pb2
from nemo_protos.context.v1 import learner_context_pb2 as pb
from nemo_protos.type.v1 import locale_pb2

from .conftest import CounterTotal

LINKED = frozenset(
    {"L-2041-1", "F-2041-1", "U-2041-L1", "U-2041-P1", "U-2041-P4", "U-2041-G1", "U-2041-M1"}
)
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _struct(value: dict[str, Any]) -> Struct:
    struct = Struct()
    struct.update(value)
    return struct


def _blocked(value: object, forbidden: frozenset[str] = LINKED) -> bool:
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


def _spellings(words: tuple[str, ...]) -> list[str]:
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
    lambda words: st.sampled_from(_spellings(words))
)
SAFE_NAME = st.sampled_from(SAFE_CONCEPTS).flatmap(lambda words: st.sampled_from(_spellings(words)))


@PROPERTY
@given(name=FORBIDDEN_NAME)
def test_forbidden_concepts_are_forbidden_in_every_spelling(name: str) -> None:
    assert is_forbidden_name(name)


@PROPERTY
@given(name=SAFE_NAME)
def test_safe_names_pass_in_every_spelling(name: str) -> None:
    assert not is_forbidden_name(name)


def test_plural_acronyms_and_digits_split_as_words() -> None:
    assert is_forbidden_name("learnerIDs")
    assert is_forbidden_name("userID2")
    assert is_forbidden_name("email2")
    assert not is_forbidden_name("nodeIDs")


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


@PROPERTY
@given(data=st.data())
def test_every_spelling_and_encoding_of_a_key_is_found(data: st.DataObject) -> None:
    key = data.draw(KEYS)
    assert is_key(key)
    variant = data.draw(key_variants(key))
    before, after = data.draw(AROUND)
    text = f"{before}{variant}{after}"
    assert _blocked(text, frozenset({key})), ascii(text)


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
    assert _blocked(f"xem {key[:cut]}{ignorable}{key[cut:]} nhé", frozenset({key}))


@pytest.mark.parametrize(("first", "last"), DEFAULT_IGNORABLE_RANGES)
def test_both_ends_of_every_default_ignorable_range_split_no_key(first: int, last: int) -> None:
    for code in (first, last):
        assert _blocked(f"L-2041{chr(code)}-1", LINKED), hex(code)


def _ignorable(code: int) -> bool:
    return any(first <= code <= last for first, last in DEFAULT_IGNORABLE_RANGES)


@pytest.mark.parametrize(("first", "last"), DEFAULT_IGNORABLE_RANGES)
def test_the_characters_next_to_every_default_ignorable_range_still_keep_a_key_apart(
    first: int, last: int
) -> None:
    # Format characters (category Cf) are invisible by definition and removed too.
    for code in (first - 1, last + 1):
        if not _ignorable(code) and unicodedata.category(chr(code)) != "Cf":
            assert not _blocked(f"L-2041{chr(code)}-1", LINKED), hex(code)


@PROPERTY
@given(key=KEYS, suffix=st.sampled_from(["0", "7", "x", "A9"]))
def test_a_longer_key_that_starts_with_a_key_passes(key: str, suffix: str) -> None:
    assert not _blocked(f"xem {key}{suffix} nhé", frozenset({key}))
    assert not _blocked(f"x{key} nhé", frozenset({key}))


# Planted at random depths, in every container a bundle can hold.

_SAFE_TEXT = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789 .,;()ăâđêôơưáàảãạ", max_size=20)
_LEAF = st.one_of(_SAFE_TEXT, st.integers(-1000, 1000), st.booleans(), st.none())
_TREE = st.recursive(
    _LEAF,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(SAFE_NAME, children, max_size=4)
    ),
    max_leaves=25,
)
_PROSE = st.sampled_from(["", "Ghi chú: ", " (hết)", "\\frac{1}{2} ", " trên [a; b]", "{ ", " ]"])


def _plant(tree: Any, payload: Any, data: st.DataObject) -> Any:
    """``tree`` with ``payload`` (a dict entry or a string) planted at a random depth."""
    children = (
        list(tree.values()) if isinstance(tree, dict) else tree if isinstance(tree, list) else []
    )
    containers = [i for i, child in enumerate(children) if isinstance(child, dict | list)]
    if bool(containers) and data.draw(st.booleans(), label="descend"):
        index = data.draw(st.sampled_from(containers), label="child")
        if isinstance(tree, dict):
            key = list(tree)[index]
            return {**tree, key: _plant(tree[key], payload, data)}
        return [*tree[:index], _plant(tree[index], payload, data), *tree[index + 1 :]]
    if isinstance(tree, dict):
        return {**tree, **payload} if isinstance(payload, dict) else {**tree, "notes": payload}
    if isinstance(tree, list):
        position = data.draw(st.integers(0, len(tree)), label="position")
        return [*tree[:position], payload, *tree[position:]]
    return payload


def _encode(tree: Any, data: st.DataObject) -> Any:
    """Containers re-encoded at random as Python data, a Struct, JSON text or Python text."""
    if not isinstance(tree, dict | list):
        return tree
    how = data.draw(st.sampled_from(["python", "struct", "json", "repr"]), label="encoding")
    if how == "json":
        encoded = json.dumps(tree, ensure_ascii=data.draw(st.booleans(), label="ascii"))
        return f"{data.draw(_PROSE)}{encoded}{data.draw(_PROSE)}"
    if how == "repr":
        return f"{data.draw(_PROSE)}{tree!r}{data.draw(_PROSE)}"
    if how == "struct" and isinstance(tree, dict):
        return _struct(tree)
    if isinstance(tree, dict):
        return {key: _encode(value, data) for key, value in tree.items()}
    return [_encode(value, data) for value in tree]


def _wrap(encoded: Any, data: st.DataObject) -> object:
    """Sometimes hand the gate a message holding the structure, as handlers do."""
    if isinstance(encoded, Struct) and data.draw(st.booleans(), label="in a message"):
        return conversation_pb2.ConversationState(agent_state=encoded)
    if isinstance(encoded, str) and data.draw(st.booleans(), label="in a message"):
        return pb.ContextBundle(rendered_text=encoded)
    return encoded


def _name_payload(data: st.DataObject) -> Any:
    name = data.draw(FORBIDDEN_NAME, label="name")
    how = data.draw(st.sampled_from(["key", "bare", "line"]), label="how")
    if how == "key":
        return {name: data.draw(_LEAF)}
    if how == "bare":
        return f"{name}: 0912 345 678"
    return f"Ghi chú\n{name} = An"


@PROPERTY
@given(tree=_TREE, data=st.data())
def test_planted_names_and_values_are_blocked_at_any_depth(tree: Any, data: st.DataObject) -> None:
    if data.draw(st.booleans(), label="name or value"):
        payload = _name_payload(data)
        forbidden = LINKED
    else:
        key = data.draw(KEYS)
        payload = f"xem {data.draw(key_variants(key))} nhé"
        forbidden = LINKED | {key}
    planted = _wrap(_encode(_plant(tree, payload, data), data), data)
    assert _blocked(planted, forbidden)


@PROPERTY
@given(tree=_TREE, data=st.data())
def test_structures_without_them_pass(tree: Any, data: st.DataObject) -> None:
    assert not _blocked(_wrap(_encode(tree, data), data))


# In bundles and in the text rendered from them.


@PROPERTY
@given(data=st.data())
def test_a_key_in_a_bundle_field_is_blocked_there_and_in_the_rendered_text(
    data: st.DataObject,
) -> None:
    key = data.draw(KEYS)
    variant = data.draw(key_variants(key))
    bundle = pb.ContextBundle(learner_ref="nemo_" + "ab" * 12, locale=locale_pb2.LOCALE_VI)
    bundle.profile.grade = 8
    where = data.draw(st.sampled_from(["node_title", "goal", "reason"]))
    if where == "node_title":
        bundle.mastery.add(node_id="math-08-slope", node_title=f"Hệ số góc {variant}", mastery=0.4)
    elif where == "goal":
        bundle.goal.title = f"Thi vào 10 ({variant})"
    else:
        bundle.next_experience.title = "Ôn tập"
        bundle.next_experience.reason = f"Giáo viên {variant} đề xuất"
    rendered = render_bundle(bundle)
    assert _blocked(bundle, frozenset({key}))
    assert _blocked(pb.ContextBundle(rendered_text=rendered), frozenset({key}))


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
    "birthday",
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


# Messages are read as the union of their strings.

_TEXT_FIELDS = st.sampled_from(["node_title", "goal", "slice", "rendered_text", "purpose"])
_SPREAD_TEXT = st.one_of(
    _SAFE_TEXT,
    SENTENCE,
    KEYS.flatmap(key_variants),
    st.sampled_from(sorted(LINKED)),
    FORBIDDEN_NAME.map(lambda name: f'{{"{name}": 1}}'),
)


def _bundle_with(texts: list[tuple[str, str]]) -> pb.ContextBundle:
    bundle = pb.ContextBundle()
    for field, text in texts:
        if field == "node_title":
            bundle.mastery.add(node_id="n", node_title=text)
        elif field == "goal":
            bundle.goal.title += text
        elif field == "slice":
            bundle.slices.append(text)
        elif field == "rendered_text":
            bundle.rendered_text += text
        else:
            bundle.purpose = text
    return bundle


@PROPERTY
@given(texts=st.lists(st.tuples(_TEXT_FIELDS, _SPREAD_TEXT), max_size=8))
def test_a_message_is_judged_as_its_strings_one_by_one(texts: list[tuple[str, str]]) -> None:
    bundle = _bundle_with(texts)
    strings = [
        *bundle.slices,
        bundle.purpose,
        bundle.rendered_text,
        bundle.goal.title,
        *(entry.node_title for entry in bundle.mastery),
    ]
    one_by_one = any(find_leak(text, forbidden_values=LINKED) for text in strings)
    assert _blocked(bundle) == one_by_one


# Containers, and what the gate hands out.


def test_map_keys_of_a_proto_map_are_checked_as_names_and_as_text() -> None:
    assert _blocked(error_details_pb2.ErrorInfo(metadata={"emailAddress": "x"}))
    assert _blocked(error_details_pb2.ErrorInfo(metadata={"note": "for U-2041-P1"}))
    assert _blocked(error_details_pb2.ErrorInfo(metadata={"U-2041-M1": "mentor"}))
    assert not _blocked(error_details_pb2.ErrorInfo(metadata={"note": "node math-08-slope"}))


def test_repository_rows_are_checked_for_names_only() -> None:
    assert find_forbidden_name({"rows": [{"node_id": "x", "extra": '{"a": {"email": 1}}'}]})
    assert find_forbidden_name([{"model": {"steps": [{"learnerId": 3}]}}])
    assert find_forbidden_name({"rows": [{"note": "{'phone_number': '0912'}"}]})
    # The rows carry the learner's own key for binding; values are judged in the bundle.
    assert find_forbidden_name({"rows": [{"node_id": "L-2041-1", "title": "[1, 2]"}]}) is None


def test_very_long_and_deeply_nested_text_is_read_in_linear_time() -> None:
    for text in ("[" * 100_000 + '"x"', '{"a": [' * 3_000, "A" * 200_000, "%41" * 50_000):
        assert not _blocked(pb.ContextBundle(rendered_text=text))


def test_gate_returns_the_message_it_checked() -> None:
    bundle = pb.ContextBundle(learner_ref="nemo_0123456789ab", rendered_text="lớp 8")
    gated = gate(bundle, forbidden_values=LINKED)
    assert gated.message == bundle


def test_changing_the_original_or_a_read_copy_after_gating_changes_nothing_returned() -> None:
    bundle = pb.ContextBundle(learner_ref="nemo_0123456789ab", rendered_text="lớp 8")
    gated = gate(bundle, forbidden_values=LINKED)
    bundle.rendered_text = "Học sinh L-2041-1"
    read = gated.message
    read.rendered_text = "email: x@example.com"
    assert gated.message.rendered_text == "lớp 8"
    assert gated.with_text(input_ref="ai-context/x").message.rendered_text == "lớp 8"


def test_a_blocked_bundle_raises_internal_leak_blocked_and_is_logged_and_counted_without_data(
    caplog: pytest.LogCaptureFixture, counter_total: CounterTotal
) -> None:
    before = counter_total("nemo.context.gate.blocked", {"rule": "encoded_value"})
    hidden = base64.b64encode(b"L-2041-1").decode()
    bundle = pb.ContextBundle(rendered_text=f"Học sinh {hidden} (Nguyễn Minh An)")
    with (
        caplog.at_level(logging.ERROR, logger="nemo_context.gate"),
        pytest.raises(ServiceError) as raised,
    ):
        gate(bundle, forbidden_values=LINKED)
    assert raised.value.code is grpc.StatusCode.INTERNAL
    assert raised.value.reason == "CONTEXT_LEAK_BLOCKED"
    assert raised.value.message == "the context could not be returned safely"
    assert counter_total("nemo.context.gate.blocked", {"rule": "encoded_value"}) == before + 1
    [record] = [r for r in caplog.records if r.name == "nemo_context.gate"]
    logged = json.dumps({**vars(record), "args": None, "msg": record.getMessage()}, default=str)
    for secret in ("L-2041-1", hidden, "Nguyễn"):
        assert secret not in logged
    assert record.getMessage() == "identifier gate blocked a bundle"
    assert record.__dict__["gate_rule"] == "encoded_value"
    assert record.__dict__["gate_location"] == "ContextBundle"


def test_the_blocked_counter_is_exported_with_its_meter_unit_and_description(
    counter_total: CounterTotal,
) -> None:
    reader = InMemoryMetricReader()
    attach_metric_reader(reader)  # counter_total has configured the process's meter provider
    with pytest.raises(ServiceError):
        gate(pb.ContextBundle(rendered_text="Học sinh L-2041-1"), forbidden_values=LINKED)
    data = reader.get_metrics_data()
    assert data is not None
    [metric] = [
        metric
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        if scope.scope.name == "nemo_context.gate"
        for metric in scope.metrics
        if metric.name == "nemo.context.gate.blocked"
    ]
    assert metric.unit == "{bundle}"
    assert "identifier gate" in (metric.description or "")


def test_gated_values_come_only_from_the_gate() -> None:
    with pytest.raises(TypeError, match="only gate"):
        Gated(pb.ContextBundle(), frozenset(), key=object())


def test_text_added_after_gating_is_checked_too(counter_total: CounterTotal) -> None:
    gated = gate(pb.ContextBundle(rendered_text="lớp 8"), forbidden_values=LINKED)
    ref = "ai-context/2026-11-29/nemo_0123456789ab0123456789ab/x.json"
    referenced = gated.with_text(input_ref=ref)
    assert referenced.message.input_ref == ref
    assert referenced.message.rendered_text == "lớp 8"
    assert gated.message.input_ref == ""  # the gated original is left as it was
    for fields, rule in (
        ({"input_ref": "ai-context/L-2041-1/x.json"}, "value"),
        ({"email": "x"}, "field_name"),
    ):
        before = counter_total("nemo.context.gate.blocked", {"rule": rule})
        with pytest.raises(ServiceError) as raised:
            gated.with_text(**fields)
        assert raised.value.reason == "CONTEXT_LEAK_BLOCKED"
        assert counter_total("nemo.context.gate.blocked", {"rule": rule}) == before + 1


def test_a_single_string_of_forbidden_values_is_refused() -> None:
    with pytest.raises(TypeError, match="collection of strings"):
        gate(pb.ContextBundle(), forbidden_values="L-2041-1")
    with pytest.raises(TypeError, match="collection of strings"):
        find_leak("lớp 8", forbidden_values="L-2041-1")


def test_key_text_percent_encoded_in_prose_is_decoded() -> None:
    assert _blocked(f"link ?id={quote('L-2041-1', safe='').replace('-', '%2D')}&x=1")
    assert _blocked("%7B%22email%22%3A%201%7D")
