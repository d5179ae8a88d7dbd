"""The evaluation's outputs: ``report.json``, ``report.png`` (a chart of the paths per prompt) and
a table on stdout; and the comparison of two reports."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt

from nemo_eval.metrics import PromptReport, Violation, as_json

_COLOURS = {"MODEL": "#2e7d32", "REPAIRED": "#f9a825", "FALLBACK": "#c62828", "ERROR": "#424242"}


def write_json(path: Path, meta: dict[str, Any], reports: Sequence[PromptReport],
               broken: Sequence[Violation]) -> None:  # fmt: skip
    document = {"meta": meta, "prompts": list(reports), "violations": list(broken)}
    path.write_text(json.dumps(document, default=as_json, ensure_ascii=False, indent=2) + "\n")


def write_chart(path: Path, title: str, reports: Sequence[PromptReport]) -> None:
    """Stacked bars: each prompt's runs by path, fallbacks split by reason in the legend."""
    keys = sorted({key for report in reports for key in report.paths})
    figure, axes = plt.subplots(figsize=(10, 0.6 * len(reports) + 2))
    names = [report.prompt_id for report in reports]
    left = [0.0] * len(reports)
    for key in keys:
        widths = [report.paths.get(key, 0) / report.runs for report in reports]
        colour = _COLOURS.get(key.split("/", 1)[0], "#757575")
        shade = 0.35 + 0.65 * ((keys.index(key) % 3) / 2) if key.startswith("FALLBACK/") else 1.0
        axes.barh(names, widths, left=left, color=colour, alpha=shade, label=key, edgecolor="white")
        left = [a + b for a, b in zip(left, widths, strict=True)]
    axes.set_xlim(0, 1)
    axes.set_xlabel("share of runs")
    axes.invert_yaxis()
    axes.set_title(title)
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3, fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _number(value: float | int | None, digits: int = 1) -> str:
    if value is None:
        return "?"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def table(reports: Sequence[PromptReport]) -> str:
    """The per-prompt table printed at the end of an evaluation."""
    header = ("prompt", "runs", "model", "paths", "p50 s", "p95 s", "in tok", "out tok")
    rows = [
        (
            r.prompt_id,
            str(r.runs),
            f"{r.model_share:.0%}",
            ", ".join(f"{key} {n}" for key, n in r.paths.items()),
            _number(r.p50_seconds),
            _number(r.p95_seconds),
            _number(r.input_tokens),
            _number(r.output_tokens),
        )
        for r in reports
    ]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
             for row in (header, *rows)]  # fmt: skip
    lines.insert(1, "  ".join("-" * width for width in widths))
    for r in reports:
        if r.guardrail_rejections:
            rules = "; ".join(f"{rule} ({n})" for rule, n in r.guardrail_rejections.items())
            lines.append(f"{r.prompt_id} guardrail rejections: {rules}")
        if r.citations:
            cited = ", ".join(f"{key} {n}" for key, n in r.citations.items())
            accuracy = _number(r.not_covered_accuracy, 2)
            lines.append(f"{r.prompt_id} citations: {cited}; not-covered accuracy {accuracy}")
    return "\n".join(lines)


def compare(first: Path, second: Path) -> str:
    """Two reports side by side: per prompt, the share served from the model, the fallback
    reasons, latency and tokens of each."""
    a, b = (json.loads(path.read_text()) for path in (first, second))
    by_id = [{p["prompt_id"]: p for p in doc["prompts"]} for doc in (a, b)]
    lines = [
        f"A = {first} ({a['meta'].get('label', '')})",
        f"B = {second} ({b['meta'].get('label', '')})",
    ]
    lines.append(f"{'prompt':28} {'model A':>8} {'model B':>8} {'p50 A':>7} {'p50 B':>7} "
                 f"{'out tok A':>10} {'out tok B':>10}")  # fmt: skip
    for prompt_id in sorted(by_id[0].keys() | by_id[1].keys()):
        pa, pb = (side.get(prompt_id, {}) for side in by_id)
        cells = [
            f"{pa.get('model_share', 0):.0%}" if pa else "-",
            f"{pb.get('model_share', 0):.0%}" if pb else "-",
            _number(pa.get("p50_seconds")),
            _number(pb.get("p50_seconds")),
            _number(pa.get("output_tokens")),
            _number(pb.get("output_tokens")),
        ]
        lines.append(f"{prompt_id:28} {cells[0]:>8} {cells[1]:>8} {cells[2]:>7} {cells[3]:>7} "
                     f"{cells[4]:>10} {cells[5]:>10}")  # fmt: skip
    lines.append(f"violations: A {len(a['violations'])}, B {len(b['violations'])}")
    return "\n".join(lines)
