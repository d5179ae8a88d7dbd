"""The figures `make bench` hands to the capacity model (``nemo capacity``): CPU milliseconds per
call of each service and of PostgreSQL, as measured in the run.

Written as JSON to ``NEMO_BENCH_FIGURES`` (default ``.nemo/bench-figures.json``). Re-sizing the
deployment from a new measurement is then ``nemo capacity --figures .nemo/bench-figures.json
--write``, which copies them to ``deploy/capacity/figures.json`` and rewrites the overlays.
"""

from __future__ import annotations

import json
import os
import platform
from datetime import UTC, datetime
from pathlib import Path

FIGURES_ENV = "NEMO_BENCH_FIGURES"
DEFAULT_PATH = Path(".nemo/bench-figures.json")


def write_figures(figures: dict[str, float]) -> Path:
    """Write ``figures`` (rounded to microseconds) with when and where they were measured."""
    path = Path(os.environ.get(FIGURES_ENV) or DEFAULT_PATH)
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "figures": {name: round(value, 3) for name, value in sorted(figures.items())},
    }
    path.write_text(json.dumps(document, indent=2) + "\n")
    return path
