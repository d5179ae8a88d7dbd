"""The tool registry: code is the source of truth.

Each tool declares its name, version, description, category, risk, mode, the OAuth scope it
needs, pydantic input and output models, the input field that names a learner (if any), the tools
whose data it returns (a composite) and its executor. The JSON Schemas of ``tools/list`` come from
the models, so the schema that validates is the schema that is published. A tool's id is
``name:vN``; its bare name resolves to its latest version.

The ``toolplane.tools`` table is a projection of this registry for grants, policies and operators
(``nemo sync-tools`` reconciles it).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from nemo_toolplane.tool_call import ToolCall
from nemo_toolplane.tool_kinds import Mode, Risk, Scope, ToolHints, hints_for

_NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*\Z")
_ID_PATTERN = re.compile(r"^(?P<name>[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*):v(?P<version>[1-9][0-9]*)\Z")
# MCP tool names allow letters, digits, "_", "-" and "." only, so a listing names an older
# version "name.vN"; it calls the same tool as the id "name:vN".
_LISTED_VERSION_PATTERN = re.compile(
    r"^(?P<name>[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*)\.v(?P<version>[1-9][0-9]*)\Z"
)


def listed_version_name(tool_id: str) -> str:
    """The name a listing shows for an older version (``name.vN`` for ``name:vN``)."""
    return tool_id.replace(":v", ".v")


In = TypeVar("In", bound=BaseModel)
Out = TypeVar("Out", bound=BaseModel)


@dataclass(frozen=True, eq=False)
class ToolDefinition(Generic[In, Out]):
    """One version of one tool."""

    name: str
    version: int
    description: str
    risk: Risk
    mode: Mode
    input_model: type[In]
    output_model: type[Out]
    execute: Callable[[ToolCall, In], Awaitable[Out]] = field(repr=False)
    #: What an OAuth token must carry for the call (agent tokens are not narrowed by scopes).
    scope: Scope = field(kw_only=True)
    learner_id_field: str | None = None
    #: The context service's agent view (a purpose of its table) the executor reads. That read
    #: decides whether the call may reach the learner, so the router does not ask first; and the
    #: registrations contract checks the view is declared there.
    agent_view: str | None = None
    #: A composite's parts: the tools (by name) whose data it returns. A policy that denies a
    #: part for a resource denies the composite for it too, or the composite would bypass it.
    parts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not _NAME_PATTERN.match(self.name):
            raise ValueError(f"tool name {self.name!r} is not category.action in snake_case")
        if self.version < 1:
            raise ValueError(f"tool {self.name!r} has version {self.version}, not 1 or more")
        if self.learner_id_field is not None and (
            self.learner_id_field not in self.input_model.model_fields
        ):
            raise ValueError(f"tool {self.name!r} names no input field {self.learner_id_field!r}")
        if self.agent_view is not None and self.learner_id_field is None:
            raise ValueError(f"tool {self.name!r} reads an agent view but names no learner")
        if self.scope.mode is not self.mode:
            raise ValueError(f"tool {self.name!r} {self.mode}s under the {self.scope} scope")

    @property
    def authorized_in_context(self) -> bool:
        """Whether the executor's read from the context service authorizes the call."""
        return self.agent_view is not None

    @property
    def tool_id(self) -> str:
        return f"{self.name}:v{self.version}"

    @property
    def category(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def hints(self) -> ToolHints:
        return hints_for(self.mode, self.risk)

    @cached_property
    def input_schema(self) -> dict[str, Any]:
        return self.input_model.model_json_schema()

    @cached_property
    def output_schema(self) -> dict[str, Any]:
        return self.output_model.model_json_schema(mode="serialization")

    def learner_id(self, arguments: In) -> str | None:
        """The learner the validated arguments name, when the tool is about one."""
        if self.learner_id_field is None:
            return None
        value = getattr(arguments, self.learner_id_field)
        return str(value) if value is not None else None


AnyTool = ToolDefinition[Any, Any]


class Registry:
    """Every tool version, looked up by versioned id or by bare name (latest version)."""

    def __init__(self, tools: Iterable[AnyTool]) -> None:
        by_id: dict[str, AnyTool] = {}
        for tool in tools:
            if tool.tool_id in by_id:
                raise ValueError(f"tool {tool.tool_id} is registered twice")
            by_id[tool.tool_id] = tool
        self._by_id = by_id
        latest: dict[str, AnyTool] = {}
        for tool in by_id.values():
            current = latest.get(tool.name)
            if current is None or tool.version > current.version:
                latest[tool.name] = tool
        self._latest = latest
        for tool in by_id.values():
            missing = [part for part in tool.parts if part not in latest or part == tool.name]
            if missing:
                raise ValueError(f"tool {tool.tool_id} names unknown parts {missing}")

    def resolve(self, name_or_id: str) -> AnyTool | None:
        """The tool a call names: an exact version by id (``name:vN``, or ``name.vN`` as
        listings show it), else the latest version of a name."""
        if _ID_PATTERN.match(name_or_id):
            return self._by_id.get(name_or_id)
        if listed := _LISTED_VERSION_PATTERN.match(name_or_id):
            return self._by_id.get(f"{listed['name']}:v{listed['version']}")
        return self._latest.get(name_or_id)

    def versions(self) -> list[AnyTool]:
        """Every registered version, ordered by id."""
        return [self._by_id[tool_id] for tool_id in sorted(self._by_id)]
