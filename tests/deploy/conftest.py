"""The deploy tests' helpers (renderer, NetworkPolicy evaluator, rendered manifests) live in
this directory and are imported as ``tests.deploy.<module>``, from the repository root."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.append(str(REPO))
