"""What both coral prompts know about a practice item: its kinds and how many choices a
multiple-choice item has."""

from __future__ import annotations

from typing import Literal

ItemKind = Literal["multiple_choice", "short_answer"]
MULTIPLE_CHOICE_OPTIONS = 4
