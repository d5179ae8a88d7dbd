"""Agent views of a learner: results built only from the context service's gated bundles.

A learner tool names one agent view (a purpose of the context service's purpose table); the
context service decides whether the call may reach the learner and what the view holds, binds
exactly that learner, pseudonymises it and passes the identifier gate, all in one call. Every
view is snapshotted, and its ``input_ref`` goes to the call's audit row. The tool keeps only the
slices its output model declares. The five measures (coverage, mastery, evidence, confidence,
readiness) stay separate fields. Results keep the keys their tool versions were published with:
where the bundle's field was renamed since (the ``*_time`` timestamps), a validation alias reads
it under its new name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from google.protobuf.json_format import MessageToDict
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from nemo_core.identifiers import KEY_PATTERN, KEY_RULE, is_key
from nemo_protos.context.v1 import learner_context_pb2
from nemo_toolplane.registry import ToolDefinition
from nemo_toolplane.tool_call import ToolCall
from nemo_toolplane.tool_kinds import Mode, Risk, Scope


def _learner_key(value: str) -> str:
    if not is_key(value):
        raise ValueError(f"learner_id must be {KEY_RULE}")
    return value


LearnerId = Annotated[
    str,
    AfterValidator(_learner_key),
    Field(
        json_schema_extra={"pattern": f"^{KEY_PATTERN}$"},
        description="Id of the learner, for example L-2041-1. Results name the learner only by a "
        "pseudonymous learner_ref.",
    ),
]
"""A learner id argument: a key (``nemo_core.identifiers``)."""


def _short_enum(prefix: str) -> Callable[[Any], Any]:
    def strip(value: Any) -> Any:
        if isinstance(value, str) and value.startswith(prefix):
            return value.removeprefix(prefix).lower()
        return value

    return strip


KnowledgeState = Annotated[str, BeforeValidator(_short_enum("KNOWLEDGE_STATE_"))]


class SliceModel(BaseModel):
    """The base of every model a view result is read into: subclass it to keep fewer fields of a
    slice than the models here do (a tool keeps only the fields its model declares)."""

    # Fields the context service adds later are dropped until a tool version declares them.
    model_config = ConfigDict(extra="ignore", frozen=True)


class Provenance(SliceModel):
    version: int = Field(0, description="Version of the computed learner model.")
    computed_at: str | None = Field(
        None,
        description="When the learning engine computed it.",
        validation_alias="compute_time",
    )
    engine_version: str = Field("", description="Version of the engine that computed it.")


class NodeRef(SliceModel):
    node_id: str
    node_title: str = ""


class Profile(SliceModel):
    grade: int | None = Field(None, description="School grade, 1 to 12.")
    age_years: int | None = Field(None, description="Age in whole years; never a birth date.")


class MasteryEntry(SliceModel):
    node_id: str
    node_title: str = ""
    mastery: float | None = None
    confidence: float | None = None
    coverage: float | None = None
    evidence_count: int = 0
    state: KnowledgeState = Field("unspecified", description="unknown, gap, shaky or solid.")


class LearningContext(SliceModel):
    subject: str = ""
    strand: str = ""
    package_title: str = ""
    focus_nodes: list[NodeRef] = Field(default_factory=list)
    study_days_per_week: int | None = None
    provenance: Provenance | None = None


class LearningProgress(SliceModel):
    coverage: float | None = None
    solid_count: int = 0
    shaky_count: int = 0
    gap_count: int = 0
    unknown_count: int = 0
    evidence_last_7_days: int = 0
    last_activity_at: str | None = Field(None, validation_alias="last_activity_time")
    period: str = Field("", description='Period of the activity figures, e.g. "2026-W47".')
    sessions: int | None = None
    minutes: int | None = None
    items_attempted: int | None = None
    items_correct: int | None = None
    streak_days: int | None = None
    improved_nodes: list[NodeRef] = Field(default_factory=list)
    declined_nodes: list[NodeRef] = Field(default_factory=list)
    provenance: Provenance | None = None


class CompetencyEntry(SliceModel):
    strand: str
    mastery: float | None = None
    coverage: float | None = None
    confidence: float | None = None
    state: KnowledgeState = "unspecified"


class Competency(SliceModel):
    code: str
    title: str = ""
    level: int | None = None
    max_level: int | None = None
    evidence_count: int | None = None
    confidence: float | None = None


class CompetencyProfile(SliceModel):
    strands: list[CompetencyEntry] = Field(default_factory=list)
    competencies: list[Competency] = Field(default_factory=list)
    provenance: Provenance | None = None


class StrandReadiness(SliceModel):
    strand: str
    readiness: float | None = None


class Readiness(SliceModel):
    readiness: float | None = None
    confidence: float | None = None
    coverage: float | None = None
    band: str = ""
    milestone: str = ""
    strands: list[StrandReadiness] = Field(default_factory=list)
    blocking_nodes: list[NodeRef] = Field(default_factory=list, description="Weakest first.")
    provenance: Provenance | None = None


class PlanStep(SliceModel):
    position: int | None = Field(None, description="From 1; absent when the plan gives no order.")
    node_id: str = ""
    node_title: str = ""
    activity: str = ""
    status: str = ""
    minutes: int | None = None


class LearningPlan(SliceModel):
    plan_id: str = ""
    title: str = ""
    horizon_days: int | None = None
    steps: list[PlanStep] = Field(default_factory=list)
    provenance: Provenance | None = None


class NextExperience(SliceModel):
    kind: str = ""
    title: str = ""
    node_id: str = ""
    node_title: str = ""
    reason: str = Field("", description="Why it is recommended, to explain to a person.")
    estimated_minutes: int | None = None
    provenance: Provenance | None = None


class ViewResult(SliceModel):
    """What every learner tool returns besides its slices."""

    learner_ref: str = Field(description="Stable pseudonym of the learner.")
    view: str = Field(description="The agent view of the context service that built the result.")
    policy_version: str = Field("", description="Version of the purpose table that applied.")
    built_at: str | None = Field(None, validation_alias="build_time")


class LearnerArgs(BaseModel):
    """Arguments of the learner read tools."""

    model_config = ConfigDict(extra="forbid")

    learner_id: LearnerId


Result = TypeVar("Result", bound=ViewResult)


def view_result(bundle: learner_context_pb2.ContextBundle, model: type[Result]) -> Result:
    """Keep the slices ``model`` declares from a gated bundle."""
    data = MessageToDict(bundle, preserving_proto_field_name=True)
    data["view"] = bundle.purpose
    return model.model_validate(data)


def view_tool(
    name: str,
    view: str,
    description: str,
    output_model: type[Result],
    *,
    version: int = 1,
    parts: tuple[str, ...] = (),
) -> ToolDefinition[LearnerArgs, Result]:
    """A LOW-risk read tool returning one agent view of the learner named in its arguments;
    ``parts`` names the tools whose data a composite view returns."""

    async def execute(call: ToolCall, args: LearnerArgs) -> Result:
        # Persisted: every agent read of a learner can be reproduced from its audit row.
        bundle = await call.context_service.agent_view(
            args.learner_id, view, call.learner_reach(), persist=True
        )
        call.record_input(bundle.input_ref)
        return view_result(bundle, output_model)

    return ToolDefinition(
        name=name,
        version=version,
        description=description,
        risk=Risk.LOW,
        mode=Mode.READ,
        input_model=LearnerArgs,
        output_model=output_model,
        execute=execute,
        scope=Scope.LEARNER_READ,
        learner_id_field="learner_id",
        agent_view=view,
        parts=parts,
    )
