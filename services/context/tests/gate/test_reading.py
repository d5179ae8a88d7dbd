"""Each string is read once and its verdict remembered: what is remembered never stands for another
circle, another set of keys, another way of reading keys or another string, the strings read
together are judged as they are one by one, and what is kept stays within its budget.

The people, phones, addresses and schools are this file's own vocabulary, none of them in the
demo data; the texts carry each identifier in a form only the circle finds (no contact shape
holds it), so a verdict that came from the wrong circle shows.
"""

from __future__ import annotations

import dataclasses
from datetime import date
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from nemo_context.gate import find_leak
from nemo_context.gate.circle import Circle
from nemo_context.gate.identifiers import NO_CIRCLE
from nemo_context.gate.reading import Kept, Reading, forget, passes, read
from nemo_context.gate.text import value_matcher
from nemo_context.gate.tokens import fold_plain
from nemo_protos.context.v1 import learner_context_pb2 as pb
from nemo_testing.corpora.ordinary import ordinary_texts

from .circles import circle_of, seeded_circle
from .spellings import PROPERTY, SENTENCE

LEARNER = "L-2041-1"
BASE = seeded_circle(LEARNER)
NO_KEYS = value_matcher(())

FAMILY = ["Phan", "Đinh", "Trương", "Huỳnh", "Võ", "Dương", "Lý"]
MIDDLE = ["Quốc", "Hữu", "Đình", "Xuân", "Kim"]
GIVEN = ["Khôi", "Tuấn", "Hằng", "Phúc", "Quỳnh", "Thảo", "Khánh", "Nhi"]
STREETS = ["Phan Đình Giót", "Đội Cấn", "Kim Mã", "Láng Hạ", "Hoàng Hoa Thám"]
SCHOOLS = ["Ngô Sĩ Liên", "Amsterdam", "Marie Curie", "Nguyễn Tất Thành"]

NAMES = st.tuples(st.sampled_from(FAMILY), st.sampled_from(MIDDLE), st.sampled_from(GIVEN)).map(
    " ".join
)
MOBILES = st.tuples(st.sampled_from(["91", "98", "35", "77", "86"]), st.integers(0, 9_999_999))


def _edit(draw: st.DrawFn) -> tuple[str, object, str]:
    """(field of Person, new value, a text holding it that only the circle finds)."""
    kind = draw(st.sampled_from(["name", "email", "phone", "address", "school", "birth_date"]))
    if kind == "name":
        name = draw(NAMES)
        return kind, name, f"Hôm nay {name} học bài"
    if kind == "email":
        local = f"{draw(st.sampled_from(GIVEN))}.{draw(st.sampled_from(FAMILY))}.hs"
        return kind, f"{local}@example.org", f"tài khoản {local} nhé"
    if kind == "phone":
        prefix, number = draw(MOBILES)
        return kind, f"0{prefix} {number:07d}", f"mã {prefix}{number:07d} của em"
    if kind == "address":
        house = draw(st.integers(1, 299))
        street = draw(st.sampled_from(STREETS))
        return kind, f"{house} {street}, phường 4", f"gặp ở {house} {street} nhé"
    if kind == "school":
        core = draw(st.sampled_from(SCHOOLS))
        return kind, f"Trường THCS {core}", f"em học trường {core}"
    # A new birth date: the learner's own, already in the circle, is no edit.
    taken = {person.birth_date for person in BASE}
    day = draw(st.dates(date(2008, 1, 1), date(2018, 12, 31)).filter(lambda d: d not in taken))
    return kind, day, f"hẹn ngày {day.day}/{day.month}/{day.year} nhé"


EDITS = st.composite(_edit)()


def _edited(field: str, value: Any) -> Circle:
    learner = dataclasses.replace(BASE[0], **{field: value})
    return circle_of([learner, *BASE[1:]])


@PROPERTY
@given(edit=EDITS)
def test_a_circle_edited_in_any_one_identifier_is_judged_afresh(
    edit: tuple[str, object, str],
) -> None:
    field, value, text = edit
    before, after = circle_of(BASE), _edited(field, value)
    reading = read(text)
    assert passes(reading, NO_KEYS, before)
    assert not passes(reading, NO_KEYS, after), field
    assert passes(reading, NO_KEYS, before)
    # The same through the whole gate, as a curriculum title and as a text.
    for value_ in (text, pb.MasteryEntry(node_title=text)):
        assert find_leak(value_, forbidden_values=(), circle=before) is None
        assert find_leak(value_, forbidden_values=(), circle=after) is not None
        assert find_leak(value_, forbidden_values=(), circle=before) is None


def test_a_circle_read_again_unchanged_is_the_same_circle() -> None:
    first, again = circle_of(BASE), circle_of(BASE)
    assert first is not again
    assert first.identity == again.identity
    assert first.identity != NO_CIRCLE.identity
    other_key = circle_of(BASE, key=b"another key of at least thirty-two characters")
    assert other_key.identity != first.identity


KEYS = st.from_regex(r"[A-Z]-[0-9]{4}-[A-Z][0-9]{1,3}", fullmatch=True)


@PROPERTY
@given(key=KEYS, sentence=SENTENCE)
def test_a_verdict_for_one_set_of_keys_is_not_used_for_another(key: str, sentence: str) -> None:
    text = f"{sentence} (mã {key})"
    assert find_leak(text, forbidden_values=()) is None
    assert find_leak(text, forbidden_values={key}) is not None
    assert find_leak(text, forbidden_values={"ZZ-99999-0"}) is None  # not a key KEYS draws


KEYED_TITLES = st.tuples(
    st.sampled_from(["Email", "Phone", "Địa chỉ", "Ngày sinh", "Họ tên"]),
    st.sampled_from([": ", " = "]),
    st.sampled_from(["gửi và nhận thư", "bài đọc hiểu", "từ vựng lớp 6"]),
).map("".join)


@PROPERTY
@given(title=KEYED_TITLES, before=st.sampled_from(["Cần ôn lại:\n", "", "- ", "{"]))
def test_a_title_read_like_a_key_is_read_as_it_is_carried(title: str, before: str) -> None:
    quoting = f"{before}{title} (30%)"
    bundle = pb.ContextBundle(
        mastery=[pb.MasteryEntry(node_id="n1", node_title=title)], rendered_text=quoting
    )
    # A title may read like a key, and so may the text that quotes it...
    assert find_leak(bundle, forbidden_values=()) is None
    # ...but the same words are a key in a text of their own, or outside the title quoted.
    assert find_leak(title, forbidden_values=()) is not None
    assert find_leak(pb.ContextBundle(rendered_text=quoting), forbidden_values=()) is not None
    other = pb.ContextBundle(
        mastery=[pb.MasteryEntry(node_id="n1", node_title=f"{title} (ôn tập)")],
        rendered_text=quoting,
    )
    assert find_leak(other, forbidden_values=()) is not None
    assert find_leak(bundle, forbidden_values=()) is None


@PROPERTY
@given(
    name=st.sampled_from(["email", "phone", "dob"]),
    opener=st.sampled_from(["{", "[{", '{"a": 1,']),
    space=st.sampled_from(["", " ", "\n  ", "\t"]),
)
def test_a_title_holding_an_object_with_a_personal_key_is_refused(
    name: str, opener: str, space: str
) -> None:
    title = f'Bài tập JSON {opener}{space}"{name}": "x"}}'
    bundle = pb.ContextBundle(mastery=[pb.MasteryEntry(node_id="n1", node_title=title)])
    finding = find_leak(bundle, forbidden_values=())
    assert finding is not None
    assert finding.rule == "key_in_text"
    plain = pb.ContextBundle(mastery=[pb.MasteryEntry(node_id="n1", node_title=f"{name}: x")])
    assert find_leak(plain, forbidden_values=()) is None


def test_a_title_holding_a_nul_quotes_nothing() -> None:
    # A NUL ends every rule's reading, so such a title could only be quoted across two strings.
    title = "Email:\0gửi"
    bundle = pb.ContextBundle(
        mastery=[pb.MasteryEntry(node_id="n1", node_title=title)], rendered_text=title
    )
    assert find_leak(bundle, forbidden_values=()) is not None


# Strings read together are judged as one by one.

CORPUS = ordinary_texts()


def _carried(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["ordinary", "sentence", "edit", "seeded"]))
    if kind == "ordinary":
        return draw(st.sampled_from(CORPUS))
    if kind == "sentence":
        sentence: str = draw(SENTENCE)
        return sentence
    if kind == "edit":
        edit: tuple[str, object, str] = draw(EDITS)
        return edit[2]
    person = draw(st.sampled_from(BASE))
    return f"{draw(SENTENCE)} {person.name}"


CARRIED = st.composite(_carried)()
FIELDS = st.sampled_from(["slice", "title", "goal", "rendered"])


@PROPERTY
@given(texts=st.lists(st.tuples(FIELDS, CARRIED), min_size=1, max_size=6), key=KEYS)
def test_strings_read_together_are_judged_as_each_alone(
    texts: list[tuple[str, str]], key: str
) -> None:
    circle = circle_of(BASE)
    bundle = pb.ContextBundle()
    for field, text in texts:
        # A title shaped like a key excuses its quotes elsewhere (tested above): a slice here.
        if field == "slice" or ":" in text or "=" in text:
            bundle.slices.append(text)
        elif field == "title":
            bundle.mastery.add(node_id="n", node_title=text)
        elif field == "goal":
            bundle.goal.title = text
        else:
            bundle.rendered_text = text
    alone = [
        *(pb.ContextBundle(slices=[text]) for text in bundle.slices),
        *(pb.MasteryEntry(node_title=entry.node_title) for entry in bundle.mastery),
        pb.ContextBundle(goal=pb.Goal(title=bundle.goal.title)),
        pb.ContextBundle(rendered_text=bundle.rendered_text),
    ]

    def verdicts() -> list[bool]:
        return [find_leak(value, forbidden_values={key}, circle=circle) is None for value in alone]

    forget()
    each = verdicts()
    forget()
    assert (find_leak(bundle, forbidden_values={key}, circle=circle) is None) == all(each)
    # What was remembered while reading them together is what each is alone.
    assert verdicts() == each


@PROPERTY
@given(text=CARRIED, learner=st.sampled_from(["L-2041-1", "L-2041-2"]))
def test_a_circle_finds_exactly_where_it_has_spans(text: str, learner: str) -> None:
    circle = circle_of(seeded_circle(learner))
    for written in (text, text.upper(), fold_plain(text), f"bạn {text}"):
        assert circle.finds(Reading(written)) == bool(circle.spans(Reading(written))), written


# Folding is character by character, whichever characters a text mixes.

MIXED = st.text(
    # Micro sign and Greek mu, full-width A and z, Cyrillic a, Greek Omicron, invisible ones.
    alphabet=st.sampled_from(
        [
            *"aAzZ09 -_.:đĐăÂêƠưỳẠỹ",
            *"\u00b5\u03bc\uff21\uff5a\u0430\u039f\u200b\u00ad\u01c5\u00bd",
        ]
    ),
    max_size=12,
)


@PROPERTY
@given(first=MIXED, second=MIXED)
def test_folding_two_texts_together_is_folding_each(first: str, second: str) -> None:
    assert fold_plain(first + second) == fold_plain(first) + fold_plain(second)


# What is kept.


def test_recent_strings_are_kept_within_the_budget_the_oldest_dropped_first() -> None:
    kept = Kept(budget=10)
    first, second, third = kept.read("abcd"), kept.read("efgh"), kept.read("ij")
    assert kept.characters == 10
    assert kept.read("abcd") is first
    assert kept.read("ij") is third
    fourth = kept.read("k")
    assert kept.characters == 7
    assert kept.read("abcd") is not first  # dropped, read anew (and kept: the oldest go)
    assert kept.read("k") is fourth
    assert kept.read("efgh") is not second
    assert kept.characters <= 10
    longer = kept.read("x" * 11)
    assert kept.read("x" * 11) is not longer  # longer than the whole budget: never kept
    assert kept.characters <= 10
    whole = kept.read("y" * 10)  # as long as the whole budget: kept, everything else dropped
    assert kept.read("y" * 10) is whole
    assert kept.characters == 10
    kept.forget()
    assert kept.characters == 0
    assert kept.read("y" * 10) is not whole


def test_the_gate_forgets_what_it_read_when_told() -> None:
    text = "Hằng đẳng thức đáng nhớ (ôn tập)"
    reading = read(text)
    assert read(text) is reading
    forget()
    assert read(text) is not reading


def test_a_reading_remembers_a_few_verdicts_and_keeps_judging_right() -> None:
    reading = Reading("Hôm nay Phan Quốc Khôi học bài")
    for n in range(10, 30):
        assert passes(reading, NO_KEYS, _edited("phone", f"09{n} 123 456"))
    assert len(reading.verdicts) <= 8
    assert not passes(reading, NO_KEYS, _edited("name", "Phan Quốc Khôi"))
    assert len(reading.verdicts) <= 8
