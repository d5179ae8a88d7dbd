"""Composite tools: one picture of a learner from one agent view, not a chain of five calls."""

from __future__ import annotations

from nemo_toolplane.registry import AnyTool
from nemo_toolplane.tools.views import (
    LearningContext,
    LearningProgress,
    NextExperience,
    Profile,
    Readiness,
    ViewResult,
    view_tool,
)


class LearningStateResult(ViewResult):
    profile: Profile | None = None
    learning_context: LearningContext | None = None
    learning_progress: LearningProgress | None = None
    readiness: Readiness | None = None
    next_experience: NextExperience | None = None


TOOLS: tuple[AnyTool, ...] = (
    view_tool(
        "nemo12.get_learner_learning_state",
        "learning_state",
        "A learner's whole learning state in one call: profile, context, progress, readiness and "
        "the next learning experience.",
        LearningStateResult,
        # The view tools whose every slice this returns too: a policy keeping one of them from
        # a learner keeps this one away too (tests/contracts/test_registrations.py checks the
        # list against the slices each tool returns).
        parts=(
            "learner.get_profile",
            "learner.get_context",
            "learner.get_learning_progress",
            "assessment.get_readiness",
            "learning.get_next_learning_experience",
        ),
    ),
)
