"""Application domain: the registry of the platform's systems, so agents reason about the platform
from data rather than from assumptions; and ``set_status``, the one write on the tool plane's own
data (HIGH risk, so it waits for a person's approval).

An application's ``metadata`` is free JSON that operators (and ``set_status``) write. What agents
get of it never names a person: keys that hold user keys or contact details are left out at any
depth (:data:`PERSONAL_KEY`), whoever wrote them. Who changed a status is in the audit log and the
approval, not in the metadata.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from nemo_core.db import Connection
from nemo_toolplane.envelope import ErrorCode, ToolError
from nemo_toolplane.registry import AnyTool, ToolDefinition
from nemo_toolplane.tool_call import ToolCall
from nemo_toolplane.tool_kinds import Mode, Risk, Scope

Status = Literal["active", "maintenance", "deprecated", "retired"]
_APPLICATION_ID = Field(
    pattern=r"^[a-z0-9][a-z0-9-]{0,63}$", description="Application id, e.g. nemo12-api."
)


class ApplicationArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    application_id: str = _APPLICATION_ID


class ListApplicationsArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    domain: str | None = Field(None, max_length=40, description="Only this domain.")
    status: Status | None = Field(None, description="Only applications in this status.")


class ApplicationSummary(BaseModel):
    application_id: str
    name: str
    domain: str
    status: Status
    environment: str
    owner: str
    description: str


class ListApplicationsResult(BaseModel):
    applications: list[ApplicationSummary]


class Application(ApplicationSummary):
    repository: str
    repository_path: str = Field(
        description="Path inside the repository (the platform is a monorepo)."
    )
    architecture_reference: str | None
    database: str | None
    deployment_target: str | None
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime


class Repository(BaseModel):
    application_id: str
    repository: str
    repository_path: str
    architecture_reference: str | None


class Environment(BaseModel):
    application_id: str
    environment: str
    deployment_target: str | None
    database: str | None
    status: Status


class SetStatusArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    application_id: str = _APPLICATION_ID
    status: Status
    reason: str = Field(min_length=1, max_length=500, description="Why, for the people on call.")


class SetStatusResult(BaseModel):
    application_id: str
    previous_status: Status
    status: Status


#: Metadata keys that name a person (``user_id``, ``owner_user``, ``users``, ``email``...).
PERSONAL_KEY = re.compile(r"user|email|phone|learner|guardian|parent", re.IGNORECASE)


def agent_metadata(value: Any) -> Any:
    """``value`` without the entries whose key names a person, at any depth."""
    if isinstance(value, dict):
        return {
            key: agent_metadata(item)
            for key, item in value.items()
            if not PERSONAL_KEY.search(str(key))
        }
    if isinstance(value, list):
        return [agent_metadata(item) for item in value]
    return value


_SELECT = """
SELECT id AS application_id, name, domain, repository, repository_path, environment, owner,
       status, description, architecture_reference, database, deployment_target, metadata,
       created_at, updated_at
FROM toolplane.applications
"""


async def _fetch(conn: Connection, application_id: str) -> dict[str, Any]:
    row = await conn.fetchrow(_SELECT + "WHERE id = $1", application_id)
    if row is None:
        raise ToolError(ErrorCode.RESOURCE_NOT_FOUND, f"no application {application_id!r}")
    return dict(row)


async def _list(call: ToolCall, args: ListApplicationsArgs) -> ListApplicationsResult:
    rows = await call.pool.fetch(
        _SELECT + "WHERE ($1::text IS NULL OR domain = $1) AND ($2::text IS NULL OR status = $2) "
        "ORDER BY id",
        args.domain,
        args.status,
    )
    return ListApplicationsResult(
        applications=[ApplicationSummary.model_validate(dict(row)) for row in rows]
    )


async def _get(call: ToolCall, args: ApplicationArgs) -> Application:
    async with call.pool.acquire() as conn:
        row = await _fetch(conn, args.application_id)
    return Application.model_validate({**row, "metadata": agent_metadata(row["metadata"])})


async def _repository(call: ToolCall, args: ApplicationArgs) -> Repository:
    async with call.pool.acquire() as conn:
        return Repository.model_validate(await _fetch(conn, args.application_id))


async def _environment(call: ToolCall, args: ApplicationArgs) -> Environment:
    async with call.pool.acquire() as conn:
        return Environment.model_validate(await _fetch(conn, args.application_id))


async def _set_status(call: ToolCall, args: SetStatusArgs) -> SetStatusResult:
    # Agents read the metadata back: it names the change, never the person behind it (the
    # call's audit row, found by its call id, does).
    change = {
        "status": args.status,
        "reason": args.reason,
        "agent_id": call.principal.agent_id,
        "call_id": call.principal.call_id,
    }
    # The call's transaction: under an approval, the approval is used up only if this commits.
    async with call.transaction() as conn:
        current = await conn.fetchval(
            "SELECT status FROM toolplane.applications WHERE id = $1 FOR UPDATE",
            args.application_id,
        )
        if current is None:
            raise ToolError(ErrorCode.RESOURCE_NOT_FOUND, f"no application {args.application_id!r}")
        if current == "retired":
            raise ToolError(ErrorCode.CONFLICT, "a retired application cannot change status")
        # The pool's codec encodes the value as JSON itself: handing it a JSON string would
        # store a string holding JSON, not the object.
        await conn.execute(
            "UPDATE toolplane.applications SET status = $2, updated_at = now(), "
            "metadata = metadata || jsonb_build_object('last_status_change', $3::jsonb) "
            "WHERE id = $1",
            args.application_id,
            args.status,
            change,
        )
    return SetStatusResult(
        application_id=args.application_id, previous_status=current, status=args.status
    )


def _read(
    name: str, description: str, args: type[BaseModel], out: type[BaseModel], run: Any
) -> AnyTool:
    return ToolDefinition(
        name=name,
        version=1,
        description=description,
        risk=Risk.LOW,
        mode=Mode.READ,
        input_model=args,
        output_model=out,
        execute=run,
        scope=Scope.APPLICATION_READ,
    )


TOOLS: tuple[AnyTool, ...] = (
    _read(
        "application.list",
        "The platform's applications, optionally of one domain or status.",
        ListApplicationsArgs,
        ListApplicationsResult,
        _list,
    ),
    _read(
        "application.get",
        "One application: owner, status, repository, deployment and architecture reference.",
        ApplicationArgs,
        Application,
        _get,
    ),
    _read(
        "application.get_repository",
        "Where an application's code lives: repository and path inside it.",
        ApplicationArgs,
        Repository,
        _repository,
    ),
    _read(
        "application.get_environment",
        "Where and how an application runs: environment, deployment target, database, status.",
        ApplicationArgs,
        Environment,
        _environment,
    ),
    ToolDefinition(
        name="application.set_status",
        version=1,
        description="Change an application's status (active, maintenance, deprecated, retired). "
        "HIGH risk: each call waits for a person's approval and then runs once.",
        risk=Risk.HIGH,
        mode=Mode.WRITE,
        input_model=SetStatusArgs,
        output_model=SetStatusResult,
        execute=_set_status,
        scope=Scope.APPLICATION_WRITE,
    ),
)
