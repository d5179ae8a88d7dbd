"""Registrations that span services agree: what the gateway's prompts and the tool plane's tools
name is declared by the context service, with the slices they read, and back.

The purposes are the table ``ListPurposes`` serves (``purpose_table()``, which the servicer
returns as it is); the prompts and tools are the registries themselves. Each failure says what
to add and where, so a feature registered in one service only cannot merge with every test
green.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, reject, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from nemo_context.acl import PURPOSE_KINDS_BY_CALLER
from nemo_context.purposes import Slice, purpose_table
from nemo_devtools.oauth_server import TOOL_SCOPES
from nemo_gateway.lang import Lang
from nemo_gateway.prompts.registry import REGISTRY, AnySpec
from nemo_gateway.prompts.spec import PromptInput, Rpc
from nemo_protos.context.v1 import purpose_pb2
from nemo_toolplane.registry import AnyTool
from nemo_toolplane.tool_kinds import Mode, Risk, Scope
from nemo_toolplane.tools import build_registry
from nemo_toolplane.tools.views import view_tool
from tests.contracts.bundle_fields import (
    CONVERSATION,
    LEARNER,
    WHERE,
    BundleFields,
    Reads,
    field_paths,
    messages,
)

PURPOSES_FILE = "services/context/src/nemo_context/purposes.py"
AUTHORIZATION_SERVER = "libs/nemo-devtools/src/nemo_devtools/oauth_server.py"
PURPOSES_TEST = "services/context/tests/test_purposes.py"
NOW = datetime(2026, 1, 15, 8, tzinfo=UTC)


@dataclass(frozen=True)
class Row:
    """One purpose as ``ListPurposes`` serves it."""

    kind: str
    slices: frozenset[str]


def _rows() -> dict[str, Row]:
    return {
        row.name: Row(
            purpose_pb2.PurposeKind.Name(row.kind).removeprefix("PURPOSE_KIND_"),
            frozenset(row.slices),
        )
        for row in purpose_table().purposes
    }


ROWS = _rows()
AGENT_VIEWS = {name for name, row in ROWS.items() if row.kind == "AGENT_VIEW"}
TOOLS = build_registry().versions()
VIEW_TOOLS = [tool for tool in TOOLS if tool.agent_view is not None]
LEARNER_PROMPTS = [spec for spec in REGISTRY if spec.purpose is not None]
#: The bundle each kind of purpose is built as, by the RPC that builds it.
BUNDLES = {"PROMPT": LEARNER, "CONVERSATION": CONVERSATION}
#: Which kind of purpose the gateway builds for a prompt, by the RPC that serves it: the runner
#: of ``RunPrompt`` and ``Answer`` calls ``BuildContext``; the chat and its summary
#: ``BuildConversationContext``.
KIND_OF_RPC = {
    Rpc.RUN_PROMPT: "PROMPT",
    Rpc.ANSWER: "PROMPT",
    Rpc.STREAM_PROMPT: "CONVERSATION",
    Rpc.INTERNAL: "CONVERSATION",
}


def _add_row(name: str, kind: str) -> str:
    return (
        f"add the {kind} row {name!r} to PURPOSES in {PURPOSES_FILE} (its slices and a reason), "
        f"bump POLICY_VERSION, and record the row and the new digest in {PURPOSES_TEST}"
    )


# --- tools and agent views -------------------------------------------------------------------


def test_every_view_a_tool_reads_is_an_agent_view_of_the_context_service() -> None:
    problems = [
        f"{tool.tool_id} reads agent view {tool.agent_view!r}, which the context service does "
        f"not declare: {_add_row(str(tool.agent_view), 'AGENT_VIEW')}"
        for tool in VIEW_TOOLS
        if tool.agent_view not in AGENT_VIEWS
    ]
    assert not problems, "\n".join(problems)
    assert VIEW_TOOLS, "the learner tools read agent views (the check above is not vacuous)"


def test_every_agent_view_has_a_tool() -> None:
    read = {tool.agent_view for tool in VIEW_TOOLS}
    problems = [
        f"agent view {view!r} has no tool: add a view_tool({view!r}, ...) to its domain's TOOLS "
        "in services/toolplane/src/nemo_toolplane/tools/, or remove the row from "
        f"{PURPOSES_FILE}"
        for view in sorted(AGENT_VIEWS - read)
    ]
    assert not problems, "\n".join(problems)


def _model_in(annotation: Any) -> type[BaseModel]:
    """The model of a field typed ``Model | None``."""
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    raise TypeError(f"no model in {annotation!r}")


def returned_slices(output: type[BaseModel]) -> set[str]:
    """The slices a view tool's output model keeps from the bundle."""
    slices = set()
    for name, info in output.model_fields.items():
        if LEARNER.splits(name):
            parts = _model_in(info.annotation).model_fields
            slices |= {LEARNER.slices[f"{name}.{part}"] for part in parts}
        elif name in LEARNER.slices:
            slices.add(LEARNER.slices[name])
    return slices


@pytest.mark.parametrize("tool", VIEW_TOOLS, ids=lambda tool: tool.tool_id)
def test_a_view_tool_returns_exactly_the_slices_its_view_declares(tool: AnyTool) -> None:
    view = str(tool.agent_view)
    if view not in AGENT_VIEWS:
        pytest.fail(f"{tool.tool_id}: {_add_row(view, 'AGENT_VIEW')}")
    declared, returned = ROWS[view].slices, returned_slices(tool.output_model)
    assert returned <= declared, (
        f"{tool.tool_id} returns {sorted(returned - declared)}, which view {view!r} does not "
        f"declare: it would always be empty; add the slices to the row in {PURPOSES_FILE} or "
        "drop the fields from the output model"
    )
    assert declared <= returned, (
        f"view {view!r} declares {sorted(declared - returned)}, which {tool.tool_id} never "
        f"returns: the context service would read and snapshot them for nothing; drop them "
        f"from the row in {PURPOSES_FILE} or return them"
    )


def _defined_in(tool: AnyTool) -> str:
    """The domain module that declares ``tool`` (where its output model is)."""
    return f"services/toolplane/src/{tool.output_model.__module__.replace('.', '/')}.py"


def parts_problems(tools: Sequence[AnyTool]) -> list[str]:
    """Where a view tool's ``parts=`` is not exactly the other view tools whose every slice it
    returns too. A tool missing from it lets a composite bypass a policy that keeps that tool
    from a learner; one too many denies the composite for data it never returns."""
    views = [tool for tool in tools if tool.agent_view is not None]
    slices = {tool.tool_id: returned_slices(tool.output_model) for tool in views}
    problems = []
    for tool in views:
        own = slices[tool.tool_id]
        covered = {
            other.name: slices[other.tool_id]
            for other in views
            if other.name != tool.name and slices[other.tool_id] and slices[other.tool_id] <= own
        }
        where = f"parts= of {tool.name} in {_defined_in(tool)}"
        problems += [
            f"{tool.tool_id} returns everything {name} returns ({', '.join(sorted(part))}): add "
            f"{name!r} to {where}, or a policy keeping {name} from a learner is bypassed"
            for name, part in sorted(covered.items())
            if name not in tool.parts
        ]
        problems += [
            f"{tool.tool_id} names part {name!r} but does not return all of what it returns: "
            f"remove it from {where}"
            for name in tool.parts
            if name not in covered
        ]
    return problems


def test_a_composite_names_as_parts_every_tool_whose_slices_it_returns() -> None:
    problems = parts_problems(TOOLS)
    assert not problems, "\n".join(problems)
    assert any(tool.parts for tool in TOOLS), "a composite tool exists (the check is not vacuous)"


def test_the_parts_check_names_a_new_overlapping_tool_and_where_to_add_it() -> None:
    # A new view tool returning what a part of a composite returns: the composite and that part
    # each need it as a part, and it needs the part.
    by_name = {tool.name: tool for tool in VIEW_TOOLS}
    pairs = [(composite, part) for composite in VIEW_TOOLS for part in composite.parts]
    assert pairs, "a composite tool exists (the check is not vacuous)"
    for composite, part in pairs:
        twin = view_tool(
            "learner.get_twin",
            str(by_name[part].agent_view),
            "the same slices under another name",
            by_name[part].output_model,
        )
        problems = parts_problems([*TOOLS, twin])
        for owner in (composite, by_name[part]):
            where = f"parts= of {owner.name} in {_defined_in(owner)}"
            assert any(f"add 'learner.get_twin' to {where}" in line for line in problems), problems
        assert any(f"add {part!r} to parts= of learner.get_twin" in line for line in problems)


@pytest.mark.parametrize("tool", TOOLS, ids=lambda tool: tool.tool_id)
def test_a_tool_needs_a_learner_scope_exactly_when_it_is_about_a_learner(tool: AnyTool) -> None:
    # What a person consents to is the scope: a tool reaching a learner under another scope
    # would hand a child's data to a host allowed to read the docs.
    about_a_learner = tool.learner_id_field is not None
    if about_a_learner:
        fix = f"give it scope=Scope.LEARNER_{tool.mode.name} in {_defined_in(tool)}"
    else:
        fix = f"give it its domain's scope in {_defined_in(tool)}"
    learner_scope = tool.scope in {Scope.LEARNER_READ, Scope.LEARNER_WRITE}
    assert learner_scope is about_a_learner, f"{tool.tool_id} needs {tool.scope}: {fix}"
    if tool.agent_view is not None:
        assert (tool.risk, tool.mode) == (Risk.LOW, Mode.READ), f"{tool.tool_id} only reads"


def test_the_local_authorization_server_offers_exactly_the_tool_scopes() -> None:
    offered, needed = set(TOOL_SCOPES), {scope.value for scope in Scope}
    assert offered == needed, (
        f"the tools ask for {sorted(needed)}, the local authorization server offers "
        f"{sorted(offered)}: make TOOL_SCOPES in {AUTHORIZATION_SERVER} the Scope enum of "
        "services/toolplane/src/nemo_toolplane/tool_kinds.py"
    )
    unused = needed - {tool.scope.value for tool in TOOLS}
    assert not unused, (
        f"no tool needs {sorted(unused)}: remove it from Scope and {AUTHORIZATION_SERVER}"
    )


# --- prompts and their purposes --------------------------------------------------------------


def test_each_rpc_has_the_kind_of_purpose_it_builds() -> None:
    assert set(KIND_OF_RPC) == set(Rpc), "say in KIND_OF_RPC which kind a new RPC builds"


@pytest.mark.parametrize("spec", LEARNER_PROMPTS, ids=lambda spec: spec.prompt_id)
def test_every_prompt_purpose_is_a_row_of_the_kind_its_rpc_builds(spec: AnySpec) -> None:
    purpose, wanted = str(spec.purpose), KIND_OF_RPC[spec.rpc]
    row = ROWS.get(purpose)
    assert row is not None, (
        f"{spec.prompt_id} names purpose {purpose!r}, which the context service does not "
        f"declare: {_add_row(purpose, wanted)}"
    )
    assert row.kind == wanted, (
        f"{spec.prompt_id} is served by {spec.rpc}, which builds a {wanted} purpose; "
        f"{purpose!r} is {row.kind}"
    )
    gateway_kinds = {
        purpose_pb2.PurposeKind.Name(kind).removeprefix("PURPOSE_KIND_")
        for kind in PURPOSE_KINDS_BY_CALLER["gateway"]
    }
    assert row.kind in gateway_kinds, f"the context service refuses {row.kind} to the gateway"


def _valid(data: st.DataObject, model: type[BaseModel], label: str) -> Any:
    """An instance of ``model``: values its own validators refuse are drawn again."""
    try:
        return data.draw(st.from_type(model), label=label)
    except ValidationError:
        reject()


def _prompt_input(spec: AnySpec, data: st.DataObject, bundle: Any) -> PromptInput[Any]:
    variables = _valid(data, spec.variables, "variables")
    lang = data.draw(st.sampled_from(list(Lang)), label="lang")
    if ROWS[str(spec.purpose)].kind == "CONVERSATION":
        return PromptInput(variables, lang, NOW, conversation=bundle)
    return PromptInput(variables, lang, NOW, context=bundle)


def reads_of(spec: AnySpec, data: st.DataObject) -> tuple[BundleFields, set[str]]:
    """The bundle fields one run of every function of ``spec`` reads, on a drawn bundle."""
    fields = BUNDLES[ROWS[str(spec.purpose)].kind]
    bundle = data.draw(messages(fields.descriptor), label="bundle")
    seen: set[str] = set()
    prompt = _prompt_input(spec, data, Reads(bundle, fields, seen))
    spec.render(prompt)
    spec.baseline(prompt)
    draft = _valid(data, spec.model_output, "model output")
    spec.guardrail(draft, prompt)
    spec.check(draft, prompt)
    spec.finish(draft, prompt)
    return fields, seen


@pytest.mark.parametrize("spec", LEARNER_PROMPTS, ids=lambda spec: spec.prompt_id)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_a_prompt_reads_only_the_slices_its_purpose_declares(
    spec: AnySpec, data: st.DataObject
) -> None:
    purpose = str(spec.purpose)
    if purpose not in ROWS:
        pytest.fail(f"{spec.prompt_id}: {_add_row(purpose, KIND_OF_RPC[spec.rpc])}")
    fields, seen = reads_of(spec, data)
    read = {path: fields.slice_of(path) for path in seen}
    undeclared = {
        path: slice_
        for path, slice_ in read.items()
        if slice_ is not None and slice_ not in ROWS[purpose].slices
    }
    assert not undeclared, "\n".join(
        f"{spec.prompt_id} reads {fields.descriptor.name}.{path}, slice {slice_!r}, "
        f"which purpose {purpose!r} does not declare (the bundle never holds it): add "
        f"Slice({slice_!r}) to the row in {PURPOSES_FILE}, bump POLICY_VERSION and record it "
        f"in {PURPOSES_TEST}; or stop reading it"
        for path, slice_ in sorted(undeclared.items())
    )


def test_the_reads_check_sees_what_prompts_read() -> None:
    # Not vacuous: the hint's baseline reads mastery, the chat reads the history, and a read of
    # the age is told from a read of the grade.
    seen: dict[str, set[str]] = {}

    @settings(max_examples=20, deadline=None, database=None)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        for prompt_id in ("learner.tutor_hint", "tutor.chat_reply"):
            spec = REGISTRY.get(prompt_id)
            assert spec is not None
            seen.setdefault(prompt_id, set()).update(reads_of(spec, data)[1])

    run()
    assert "mastery" in seen["learner.tutor_hint"]
    assert "recent_messages" in seen["tutor.chat_reply"]
    assert "profile.grade" in seen["tutor.chat_reply"]
    assert "profile.age_years" not in seen["tutor.chat_reply"]


# --- the bundle tables ------------------------------------------------------------------------


def _bundle_tables() -> Iterator[BundleFields]:
    yield LEARNER
    yield CONVERSATION


@pytest.mark.parametrize("fields", list(_bundle_tables()), ids=lambda f: f.message.__name__)
def test_every_bundle_field_is_a_slice_or_the_envelope(fields: BundleFields) -> None:
    descriptor = fields.descriptor
    paths = field_paths(descriptor, fields)
    placed = set(fields.slices) | fields.envelope
    assert paths - placed == set(), (
        f"fields of {descriptor.name} in no table: add each to its slices or its envelope "
        f"in {WHERE}"
    )
    assert placed - paths == set(), f"{WHERE} places fields {descriptor.name} does not have"
    assert not fields.envelope & set(fields.slices)


def test_every_slice_is_held_by_a_bundle_field() -> None:
    held = {slice_ for fields in _bundle_tables() for slice_ in fields.slices.values()}
    assert held == {str(slice_) for slice_ in Slice}, (
        f"a Slice member no bundle field holds, or a field naming no Slice: update {WHERE}"
    )
