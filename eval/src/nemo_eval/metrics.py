"""What an evaluation measures per prompt, and the invariants no run may break.

Invariants (any break makes ``make eval`` exit non-zero):

- **identifier in a prompt**: a body the provider received holds a demo learner's raw id or one
  of their descriptive identifiers (name, email, phone, address, school, birth date, links);
- **model-set score**: a served model text (path MODEL or REPAIRED) puts a number next to a
  score, mastery or confidence, which only the server may set;
- **uncited model answer**: a grounded answer served from the model (covered, path MODEL or
  REPAIRED) with an uncited sentence or a citation of a source that does not exist.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from nemo_eval.runner import Result
from nemo_ops.seed_data.people import LEARNERS

#: Learner columns whose values are identifiers (never the grade or keys other than the id).
IDENTIFIER_COLUMNS = (
    "display_name", "email", "phone", "address", "school_name", "birth_date",
    "avatar_url", "facebook_url", "photo_url",
)  # fmt: skip

_MEASURE = (
    r"(?:thành thạo|điểm|độ tin cậy|độ vững|mức sẵn sàng|mastery|score|confidence|proficiency"
    r"|readiness)"
)
_CLAIM = re.compile(
    rf"{_MEASURE}[^.!?\n\d]{{0,30}}\d|\d+(?:[.,]\d+)?\s*(?:%|/\s*(?:10|100)\b)[^.!?\n\d]{{0,30}}"
    rf"{_MEASURE}|\b\d+(?:[.,]\d+)?\s*/\s*10\s*điểm",
    re.IGNORECASE,
)


def identifiers() -> list[re.Pattern[str]]:
    """Patterns of the demo learners' raw ids (as whole words) and descriptive identifiers."""
    patterns: list[re.Pattern[str]] = []
    for row in LEARNERS.rows:
        patterns.append(re.compile(rf"(?<![\w-]){re.escape(str(row['id']))}(?![\w-])"))
        for column in IDENTIFIER_COLUMNS:
            value = row.get(column)
            if isinstance(value, date):
                value = value.isoformat()
            if isinstance(value, str) and value:
                patterns.append(re.compile(re.escape(value)))
    return patterns


@dataclass
class Violation:
    invariant: str
    prompt_id: str
    case: str
    detail: str


def violations(results: Iterable[Result]) -> list[Violation]:
    """Every invariant broken by these runs."""
    found: list[Violation] = []
    patterns = identifiers()
    for result in results:
        case = result.case
        for body in result.sent:
            text = json.dumps(json.loads(body), ensure_ascii=False)
            for pattern in patterns:
                if pattern.search(text):
                    found.append(
                        Violation(
                            "identifier in a prompt", case.prompt_id, case.label, pattern.pattern
                        )
                    )
        served = result.path in ("MODEL", "REPAIRED")
        for text in result.texts if served else ():
            if (claim := _CLAIM.search(text)) is not None:
                found.append(
                    Violation("model-set score", case.prompt_id, case.label, claim.group(0))
                )
        answered = case.prompt_id == "knowledge.answer" and served and result.covered
        if answered and (result.uncited_sentences or result.invalid_citations):
            detail = (
                f"{result.uncited_sentences} uncited sentences, "
                f"{result.invalid_citations} bogus citations"
            )
            found.append(Violation("uncited model answer", case.prompt_id, case.label, detail))
    return found


def _percentile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def _total(values: Iterable[int | None]) -> int | None:
    """A sum that is unknown once any part is unknown."""
    total = 0
    for value in values:
        if value is None:
            return None
        total += value
    return total


@dataclass
class PromptReport:
    """The measures of one prompt."""

    prompt_id: str
    runs: int
    paths: dict[str, int]
    """Runs by path and reason, for example ``FALLBACK/ATTEMPTS_EXHAUSTED``."""
    guardrail_rejections: dict[str, int]
    """Rejections by the guardrail's rule (as the gateway logs it)."""
    p50_seconds: float | None
    p95_seconds: float | None
    input_tokens: int | None
    output_tokens: int | None
    attempts: int
    citations: dict[str, int] = field(default_factory=dict)
    not_covered_accuracy: float | None = None
    """Share of questions whose covered/not covered answer matched their label."""

    @property
    def model_share(self) -> float:
        served = sum(
            n for key, n in self.paths.items() if not key.startswith(("FALLBACK", "ERROR"))
        )
        return served / self.runs if self.runs else 0.0


def guardrail_rules(gateway_log: Path) -> dict[str, Counter[str]]:
    """Guardrail rejections by prompt and rule, from the gateway's JSON log."""
    rules: dict[str, Counter[str]] = {}
    if not gateway_log.exists():
        return rules
    for line in gateway_log.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("message") != "prompt fell back to its baseline":
            continue
        if entry.get("reason") != "GUARDRAIL_REJECTED":
            continue
        prompt_id = str(entry.get("prompt", "")).split("@", 1)[0]
        rules.setdefault(prompt_id, Counter())[str(entry.get("detail", ""))] += 1
    return rules


def summarise(results: Sequence[Result], rules: dict[str, Counter[str]]) -> list[PromptReport]:
    """One report per prompt, in the order the prompts first ran."""
    order: list[str] = []
    for result in results:
        if result.case.prompt_id not in order:
            order.append(result.case.prompt_id)
    reports = []
    for prompt_id in order:
        runs = [r for r in results if r.case.prompt_id == prompt_id]
        seconds = sorted(r.seconds for r in runs)
        paths = Counter(f"{r.path}/{r.reason}" if r.reason else r.path for r in runs)
        report = PromptReport(
            prompt_id=prompt_id,
            runs=len(runs),
            paths=dict(sorted(paths.items())),
            guardrail_rejections=dict(rules.get(prompt_id, Counter())),
            p50_seconds=_percentile(seconds, 50),
            p95_seconds=_percentile(seconds, 95),
            input_tokens=_total(r.input_tokens for r in runs),
            output_tokens=_total(r.output_tokens for r in runs),
            attempts=sum(r.attempts for r in runs),
        )
        if prompt_id == "knowledge.answer":
            report.citations = {
                "valid": sum(r.valid_citations for r in runs),
                "bogus": sum(r.invalid_citations for r in runs),
                "uncited_sentences": sum(r.uncited_sentences for r in runs),
            }
            labelled = [r for r in runs if r.case.covered is not None and r.covered is not None]
            if labelled:
                right = sum(r.covered == r.case.covered for r in labelled)
                report.not_covered_accuracy = right / len(labelled)
        reports.append(report)
    return reports


def as_json(value: Any) -> Any:
    """Reports as plain JSON values."""
    if isinstance(value, PromptReport | Violation):
        data = dict(vars(value))
        if isinstance(value, PromptReport):
            data["model_share"] = value.model_share
        return data
    raise TypeError(type(value).__name__)
