"""The tool registry: the seed's MVP list plus application.set_status, versions, schemas and the
hints derived from mode and risk."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from nemo_toolplane.registry import Registry, ToolDefinition
from nemo_toolplane.tool_call import ToolCall
from nemo_toolplane.tool_kinds import Mode, Risk, Scope, ToolHints, hints_for
from nemo_toolplane.tools import build_registry

EXPECTED = {
    "application.get": (Risk.LOW, Mode.READ, None),
    "application.get_environment": (Risk.LOW, Mode.READ, None),
    "application.get_repository": (Risk.LOW, Mode.READ, None),
    "application.list": (Risk.LOW, Mode.READ, None),
    "application.set_status": (Risk.HIGH, Mode.WRITE, None),
    "assessment.get_mastery": (Risk.LOW, Mode.READ, "learner_id"),
    "assessment.get_readiness": (Risk.LOW, Mode.READ, "learner_id"),
    "coral.get_knowledge_node": (Risk.LOW, Mode.READ, None),
    "coral.search_knowledge": (Risk.LOW, Mode.READ, None),
    "docs.get_doc": (Risk.LOW, Mode.READ, None),
    "docs.search_docs": (Risk.LOW, Mode.READ, None),
    "learner.get_competency_profile": (Risk.LOW, Mode.READ, "learner_id"),
    "learner.get_context": (Risk.LOW, Mode.READ, "learner_id"),
    "learner.get_learning_progress": (Risk.LOW, Mode.READ, "learner_id"),
    "learner.get_profile": (Risk.LOW, Mode.READ, "learner_id"),
    "learner.update_profile": (Risk.HIGH, Mode.WRITE, "learner_id"),
    "learning.get_current_plan": (Risk.LOW, Mode.READ, "learner_id"),
    "learning.get_next_learning_experience": (Risk.LOW, Mode.READ, "learner_id"),
    "nemo12.get_learner_learning_state": (Risk.LOW, Mode.READ, "learner_id"),
}


def test_the_registry_holds_the_mvp_tools() -> None:
    registry = build_registry()
    held = {
        tool.name: (tool.risk, tool.mode, tool.learner_id_field) for tool in registry.versions()
    }
    differ = "".join(
        f"    {name!r}: (Risk.{risk.name}, Mode.{mode.name}, {field!r}),\n"
        for name, (risk, mode, field) in held.items()
        if EXPECTED.get(name) != (risk, mode, field)
    )
    gone = sorted(set(EXPECTED) - set(held))
    assert held == EXPECTED, (
        f"record each tool's risk, mode and learner field in EXPECTED:\n{differ}"
        + (f"and remove {gone}" if gone else "")
    )
    assert [tool.name for tool in registry.versions()] == sorted(EXPECTED)


def test_schemas_come_from_the_models() -> None:
    registry = build_registry()
    for tool in registry.versions():
        assert tool.input_schema["type"] == "object"
        assert tool.input_schema == tool.input_model.model_json_schema()
        assert tool.output_schema["type"] == "object"
    search = registry.resolve("docs.search_docs")
    assert search is not None
    limit = search.input_schema["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"], limit["default"]) == (1, 10, 5)


class _Args(BaseModel):
    learner_id: str


class _Out(BaseModel):
    ok: bool


async def _run(call: ToolCall, args: _Args) -> _Out:
    return _Out(ok=True)


def _tool(name: str, version: int, **changes: object) -> ToolDefinition[_Args, _Out]:
    values: dict[str, object] = {
        "name": name,
        "version": version,
        "description": "test tool",
        "risk": Risk.LOW,
        "mode": Mode.READ,
        "input_model": _Args,
        "output_model": _Out,
        "execute": _run,
        "scope": Scope.DOCS_READ,
    }
    values.update(changes)
    return ToolDefinition(**values)  # type: ignore[arg-type]


def test_a_bare_name_resolves_to_the_latest_version_and_an_id_to_exactly_that() -> None:
    registry = Registry([_tool("demo.read", 1), _tool("demo.read", 3), _tool("demo.read", 2)])
    latest = registry.resolve("demo.read")
    assert latest is not None
    assert latest.tool_id == "demo.read:v3"
    pinned = registry.resolve("demo.read:v1")
    assert pinned is not None
    assert pinned.version == 1
    assert registry.resolve("demo.read:v4") is None
    assert registry.resolve("demo.read:v0") is None
    assert registry.resolve("demo") is None
    listed = registry.resolve("demo.read.v1")  # as a listing names an older version
    assert listed is pinned
    assert registry.resolve("demo.read.v4") is None
    assert registry.resolve("demo.read:v1\n") is None
    assert registry.resolve("demo.read\n") is None
    assert [tool.tool_id for tool in registry.versions()] == [
        "demo.read:v1",
        "demo.read:v2",
        "demo.read:v3",
    ]


def test_malformed_tools_are_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        Registry([_tool("demo.read", 1), _tool("demo.read", 1)])
    with pytest.raises(ValueError, match=r"category\.action"):
        _tool("DemoRead", 1)
    with pytest.raises(ValueError, match="version"):
        _tool("demo.read", 0)
    with pytest.raises(ValueError, match="no input field"):
        _tool("demo.read", 1, learner_id_field="student")


@pytest.mark.parametrize(
    ("mode", "risk", "hints"),
    [
        (Mode.READ, Risk.LOW, ToolHints(True, False, True, False)),
        (Mode.READ, Risk.HIGH, ToolHints(True, False, True, False)),
        (Mode.WRITE, Risk.MEDIUM, ToolHints(False, False, False, False)),
        (Mode.WRITE, Risk.HIGH, ToolHints(False, True, False, False)),
        (Mode.WRITE, Risk.CRITICAL, ToolHints(False, True, False, False)),
    ],
)
def test_hints_follow_mode_and_risk(mode: Mode, risk: Risk, hints: ToolHints) -> None:
    assert hints_for(mode, risk) == hints
