"""No false alarms: the ordinary-text corpus (``nemo_testing.corpora.ordinary``, over a thousand
Vietnamese and English lesson titles, formulas, class names, vocabulary lists, codes and dates)
passes the gate in a structured field and comes out of the masker unchanged, for the seeded
circles, whose given names include ordinary words ("An", "Mai", "Nam", "Hùng", "Lan")."""

from __future__ import annotations

import pytest

from nemo_context.gate import find_leak
from nemo_context.gate.masking import mask_text
from nemo_context.gate.text import value_matcher
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
