"""The latest ``make eval`` report: its JSON (per prompt: runs, paths, latency, tokens) and its
chart, from the reports directory (``.nemo/eval`` locally)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Report:
    label: str
    meta: dict[str, Any]
    prompts: list[dict[str, Any]]
    violations: list[Any]
    chart: Path | None


def latest_report(directory: Path) -> Report | None:
    """The newest readable report in ``directory``; None when there is none."""
    if not directory.is_dir():
        return None
    for path in sorted(directory.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True):
        try:
            document = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(document, dict) or not isinstance(document.get("prompts"), list):
            continue
        chart = path.with_suffix(".png")
        return Report(
            label=path.stem,
            meta=document.get("meta") or {},
            prompts=[p for p in document["prompts"] if isinstance(p, dict)],
            violations=list(document.get("violations") or []),
            chart=chart if chart.is_file() else None,
        )
    return None
