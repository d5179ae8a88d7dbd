"""Learner domain: a learner's profile, context, progress and competency, all read through agent
views; and ``update_profile``, which exists so the policy engine can be seen to stop it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from nemo_toolplane.envelope import ErrorCode, ToolError
from nemo_toolplane.registry import AnyTool, ToolDefinition
from nemo_toolplane.tool_call import ToolCall
from nemo_toolplane.tool_kinds import Mode, Risk, Scope
from nemo_toolplane.tools.views import (
    CompetencyProfile,
    LearnerId,
    LearningContext,
    LearningProgress,
    Profile,
    ViewResult,
    view_tool,
)


class ProfileResult(ViewResult):
    profile: Profile | None = None


class ContextResult(ViewResult):
    learning_context: LearningContext | None = None


class ProgressResult(ViewResult):
    learning_progress: LearningProgress | None = None


class CompetencyResult(ViewResult):
    competency_profile: CompetencyProfile | None = None


class UpdateProfileArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    learner_id: LearnerId
    grade: int = Field(ge=1, le=12, description="New school grade.")


class UpdateProfileResult(BaseModel):
    updated: bool


async def _update_profile(call: ToolCall, args: UpdateProfileArgs) -> UpdateProfileResult:
    # Learner records change only in the platform app; the tool plane holds no write path to
    # them, and the deny-learner-writes policy stops every call before it gets here.
    raise ToolError(
        ErrorCode.DEPENDENCY_ERROR,
        "learner profiles are changed in the platform app, not by agents",
        retryable=False,
    )


TOOLS: tuple[AnyTool, ...] = (
    view_tool(
        "learner.get_profile",
        "profile",
        "A learner's grade and age in whole years (never a birth date, name or contact).",
        ProfileResult,
    ),
    view_tool(
        "learner.get_context",
        "context",
        "Where the learner works now: subject, strand, content package and focus knowledge, as "
        "the learning engine computed them.",
        ContextResult,
    ),
    view_tool(
        "learner.get_learning_progress",
        "learning_progress",
        "Progress across the curriculum: coverage, counts of solid, shaky, gap and unknown "
        "knowledge, recent activity.",
        ProgressResult,
    ),
    view_tool(
        "learner.get_competency_profile",
        "competency_profile",
        "Competency per curriculum strand, with mastery, coverage and confidence kept apart.",
        CompetencyResult,
    ),
    ToolDefinition(
        name="learner.update_profile",
        version=1,
        description="Change a learner's grade. Agents are denied this by policy.",
        risk=Risk.HIGH,
        mode=Mode.WRITE,
        input_model=UpdateProfileArgs,
        output_model=UpdateProfileResult,
        execute=_update_profile,
        scope=Scope.LEARNER_WRITE,
        learner_id_field="learner_id",
    ),
)
