"""Labelled corpora for the gateway's text checks, in Vietnamese and English.

- ``instructions.tsv``: passages that try to instruct the model reading them (``injected``) and
  ordinary teaching text that merely uses the same words (``benign``: "bỏ qua yêu cầu của đề
  bài", "ignore air resistance", ``print()``, role-play in a word problem);
- ``score_claims.tsv``: learner-facing sentences that state a score, mastery, accuracy or a
  similar measure of the learner (``claim``) and teaching text full of numbers, percentages and
  other people's scores (``benign``).

Each row has a label, a language, a split and the text. Every third passage of each group is
``held_out``: the detectors' patterns are tuned on the ``tune`` split only, and both splits are
reported (``make bench``), so a pattern written for one sentence shows up as a gap between them.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

Split = Literal["tune", "held_out"]
CORPORA = ("instructions", "score_claims")
POSITIVE = {"instructions": "injected", "score_claims": "claim"}
"""The label each corpus's detector should flag."""


@dataclass(frozen=True, slots=True)
class Labelled:
    """One passage of a corpus."""

    label: str
    lang: str
    split: Split
    text: str


@cache
def load(corpus: str) -> tuple[Labelled, ...]:
    """Every row of ``corpus`` (``instructions`` or ``score_claims``), in file order."""
    table = resources.files("nemo_testing.corpora").joinpath(f"{corpus}.tsv")
    lines = table.read_text(encoding="utf-8").splitlines()
    reader = csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE)
    return tuple(
        Labelled(row["label"], row["lang"], _split(row["split"]), row["text"]) for row in reader
    )


def _split(value: str) -> Split:
    if value not in ("tune", "held_out"):
        raise ValueError(f"unknown split {value!r}")
    return "tune" if value == "tune" else "held_out"


@dataclass(frozen=True, slots=True)
class Score:
    """Precision and recall of a detector on some rows."""

    true_positives: int
    false_positives: int
    false_negatives: int
    rows: int

    @property
    def precision(self) -> float:
        flagged = self.true_positives + self.false_positives
        return self.true_positives / flagged if flagged else 1.0

    @property
    def recall(self) -> float:
        positives = self.true_positives + self.false_negatives
        return self.true_positives / positives if positives else 1.0


def score(
    corpus: str, detector: Callable[[str], bool], rows: Iterable[Labelled] | None = None
) -> Score:
    """How ``detector`` does on ``rows`` (all of ``corpus`` by default)."""
    positive = POSITIVE[corpus]
    tp = fp = fn = count = 0
    for row in load(corpus) if rows is None else rows:
        count += 1
        flagged, wanted = detector(row.text), row.label == positive
        tp += flagged and wanted
        fp += flagged and not wanted
        fn += wanted and not flagged
    return Score(tp, fp, fn, count)


def split(corpus: str, which: Split) -> tuple[Labelled, ...]:
    """The rows of one split."""
    return tuple(row for row in load(corpus) if row.split == which)
