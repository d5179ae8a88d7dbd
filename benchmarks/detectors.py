"""Precision and recall of the gateway's text checks on their labelled corpora
(``nemo_testing.corpora``): the instruction flagger on injected and benign passages, the
score-claim check on claims and benign teaching text, each on the split its patterns were tuned
on and on the held-out split, with the CPU microseconds one check costs."""

from __future__ import annotations

import time
from collections.abc import Callable

from nemo_gateway.grounding.instructions import looks_like_instructions
from nemo_gateway.prompts.score_claims import states_a_score
from nemo_testing import corpora

DETECTORS: dict[str, Callable[[str], bool]] = {
    "instructions": looks_like_instructions,
    "score_claims": states_a_score,
}


def _cpu_us_per_check(detector: Callable[[str], bool], texts: list[str]) -> float:
    rounds = 20
    started = time.process_time()
    for _ in range(rounds):
        for text in texts:
            detector(text)
    return (time.process_time() - started) * 1e6 / (rounds * len(texts))


def measure_detectors() -> str:
    """One line per corpus and split: precision, recall and counts; the goal is 0.95 each."""
    lines = ["text checks on their labelled corpora (goal: recall >= 0.95 at precision >= 0.95):"]
    for corpus, detector in DETECTORS.items():
        texts = [row.text for row in corpora.load(corpus)]
        for split in ("tune", "held_out"):
            score = corpora.score(corpus, detector, corpora.split(corpus, split))
            lines.append(
                f"  {corpus:<12} {split:<8} precision {score.precision:.3f}"
                f" recall {score.recall:.3f} ({score.rows} passages: {score.true_positives} hit,"
                f" {score.false_positives} false alarm, {score.false_negatives} missed)"
            )
        lines.append(f"  {corpus:<12} cpu {_cpu_us_per_check(detector, texts):.1f} us per passage")
    return "\n".join(lines)
