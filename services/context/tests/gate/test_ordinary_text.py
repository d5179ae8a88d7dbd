"""No false alarms: the ordinary-text corpus (``nemo_testing.corpora.ordinary``, over a thousand
Vietnamese and English lesson titles, formulas, class names, vocabulary lists, codes and dates)
passes the gate in a structured field and comes out of the masker unchanged, for the seeded
circles, whose given names include ordinary words ("An", "Mai", "Nam", "Hùng", "Lan")."""

from __future__ import annotations

import hashlib
import uuid

import pytest

from nemo_context.gate import find_leak
from nemo_context.gate.masking import mask_text
from nemo_context.gate.shapes import shapes
from nemo_context.gate.text import value_matcher
from nemo_context.gate.tokens import fold_plain
from nemo_context.render import render_bundle
from nemo_protos.context.v1 import learner_context_pb2 as pb
from nemo_protos.type.v1 import locale_pb2
from nemo_testing.corpora.ordinary import ordinary_texts

from .circles import circle_of, seeded_circle
from .spellings import LINKED

CORPUS = ordinary_texts()


def test_the_corpus_is_large_and_bilingual() -> None:
    assert len(CORPUS) >= 1000
    assert len(set(CORPUS)) == len(CORPUS)
    assert sum(any(char in "ăâđêôơư" for char in text.lower()) for text in CORPUS) > 300
    assert sum(text.isascii() for text in CORPUS) > 150


@pytest.mark.parametrize("learner", ["L-2041-1", "L-2041-2"])
def test_ordinary_text_is_neither_refused_nor_masked(learner: str) -> None:
    circle = circle_of(seeded_circle(learner))
    matcher = value_matcher(tuple(sorted(LINKED)))
    refused = [
        text
        for text in CORPUS
        if find_leak(pb.MasteryEntry(node_title=text), forbidden_values=LINKED, circle=circle)
    ]
    masked = [text for text in CORPUS if mask_text(text, matcher, circle)[0] != text]
    assert refused == []
    assert [text for text in masked if ":" not in text] == []


@pytest.mark.parametrize("learner", ["L-2041-1", "L-2041-2"])
def test_curriculum_titles_shaped_like_keys_build_and_render(learner: str) -> None:
    circle = circle_of(seeded_circle(learner))
    titles = [text for text in CORPUS if ":" in text][:200]
    bundle = pb.ContextBundle(
        locale=locale_pb2.LOCALE_VI,
        mastery=[pb.MasteryEntry(node_id=f"n{i}", node_title=t) for i, t in enumerate(titles)],
    )
    bundle.rendered_text = render_bundle(bundle)
    assert find_leak(bundle, forbidden_values=LINKED, circle=circle) is None


def test_machine_made_references_hold_no_contact_shape() -> None:
    """Digests and UUIDs in a bundle (a snapshot's key and SHA-256) are random: runs of digits
    in them start like phone numbers (about one SHA-256 digest in three thousand), and a phone
    number is never read inside a longer token."""
    digests = [hashlib.sha256(str(n).encode()).hexdigest() for n in range(30_000)]
    uuids = [str(uuid.uuid5(uuid.NAMESPACE_URL, str(n))) for n in range(30_000)]
    refs = [
        f"ai-context/2026-12-05/nemo_{d[:24]}/{u}.json" for d, u in zip(digests, uuids, strict=True)
    ]
    found = [text for text in (*digests, *uuids, *refs) if shapes(fold_plain(text))]
    assert found == []


def test_a_phone_number_ends_where_its_digits_end() -> None:
    assert [kind for *_, kind in shapes("goi 0903221457 nhe")] == ["phone"]
    assert [kind for *_, kind in shapes("goi 0903221457.")] == ["phone"]
    assert shapes("0796081998e29dd4086c884f9d9cf84a") == []
