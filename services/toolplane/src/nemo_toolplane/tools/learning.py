"""Learning domain: the current plan and the recommended next experience, with its reason."""

from __future__ import annotations

from nemo_toolplane.registry import AnyTool
from nemo_toolplane.tools.views import LearningPlan, NextExperience, ViewResult, view_tool


class CurrentPlanResult(ViewResult):
    current_plan: LearningPlan | None = None


class NextExperienceResult(ViewResult):
    next_experience: NextExperience | None = None


TOOLS: tuple[AnyTool, ...] = (
    view_tool(
        "learning.get_current_plan",
        "current_plan",
        "The learner's current plan: ordered steps as the learning engine set them.",
        CurrentPlanResult,
    ),
    view_tool(
        "learning.get_next_learning_experience",
        "next_learning_experience",
        "The recommended next learning experience and why, so it can be explained to a person.",
        NextExperienceResult,
    ),
)
