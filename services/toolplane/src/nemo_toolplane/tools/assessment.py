"""Assessment domain: readiness and mastery, as the learning engine computed them."""

from __future__ import annotations

from pydantic import Field

from nemo_toolplane.registry import AnyTool
from nemo_toolplane.tools.views import MasteryEntry, Readiness, ViewResult, view_tool


class ReadinessResult(ViewResult):
    readiness: Readiness | None = None


class MasteryResult(ViewResult):
    mastery: list[MasteryEntry] = Field(default_factory=list)


TOOLS: tuple[AnyTool, ...] = (
    view_tool(
        "assessment.get_readiness",
        "readiness",
        "Readiness for the learner's next milestone, its band and the knowledge holding it back.",
        ReadinessResult,
    ),
    view_tool(
        "assessment.get_mastery",
        "mastery",
        "Mastery per knowledge node, weakest first, with confidence, coverage and evidence count "
        "kept apart.",
        MasteryResult,
    ),
)
