"""The tool router: what happens to every call, from either edge (MCP or gRPC).

    rate limit -> identify tool -> grant -> scope -> validate arguments -> policy
    -> resource authorization (tools about a learner) -> approval -> execute -> audit

Resource authorization is the context service's: for agent views it is decided in the same call
that reads the view (one round trip); for other tools about a learner, and for any call that
needs an approval (no request is put to an operator for a learner out of reach), the router asks
it first. Either way it decides on who the call acts for, where that user came from (a user the
agent merely asserted reaches nobody) and the covering grants' resource scopes.

An OAuth access token's scopes narrow the agent's grants and never widen them: a tool outside
them is refused (and not listed), after the grant check so that a tool the agent was never
granted still answers as unknown. Agent tokens carry no scopes.

The router holds no domain logic: it knows what a tool is, not what any tool does. Every branch,
unknown tools, invalid input and denials included, ends in exactly one audit row, so the log shows
who is probing for permissions, not only who succeeded; an edge that refuses a request before
routing it (a malformed call, a refused credential, a request that is no tool call) records it
through :meth:`ToolRouter.refuse`. The rate limit comes first, so guessing tool names costs an
agent its rate like any other call.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import asyncpg
from opentelemetry import metrics
from pydantic import ValidationError

from nemo_core.db import Connection
from nemo_core.identifiers import mention_pattern
from nemo_toolplane.approvals import (
    Approval,
    CallApprovals,
    bind_call,
    caller_deadline,
    out_of_time,
)
from nemo_toolplane.audit.log import AuditEntry, AuditLog, CallStatus
from nemo_toolplane.context_client import LearnerReach, not_reachable
from nemo_toolplane.decisions import Decision
from nemo_toolplane.envelope import ErrorCode, ToolError, internal_error
from nemo_toolplane.limits.calls import Admission, CallLimiter, describe
from nemo_toolplane.policy import (
    Request,
    ToolFacts,
    Verdict,
    evaluate,
    grant_covers_tool,
    visible,
)
from nemo_toolplane.principal import NO_CREDENTIAL, Credential, Principal, new_call_id
from nemo_toolplane.registry import AnyTool, Registry, listed_version_name
from nemo_toolplane.rules.store import AgentRules
from nemo_toolplane.tool_call import Services, ToolCall
from nemo_toolplane.tool_kinds import Mode

logger = logging.getLogger(__name__)
# The call's span is the MCP server's (or gRPC's); executions are counted per tool, which also
# shows that a denied tool's executor never ran.
_executions = metrics.get_meter(__name__).create_counter(
    "nemo.toolplane.tool.executions",
    unit="{call}",
    description="Tool executors started, by tool id.",
)


@dataclass(frozen=True)
class CallOutcome:
    """How one call ended: the tool's output, or the error envelope's content."""

    #: The tool the call resolved to; None when its name resolves to none.
    tool: AnyTool | None
    status: CallStatus
    decision: Decision
    output: dict[str, Any] | None = None
    error: ToolError | None = None


#: The method a tool call is, on each edge (the audit row's ``method``).
CALL_METHODS = {"mcp": "tools/call", "grpc": "CallTool"}


@dataclass(frozen=True)
class Refusal:
    """A request an edge refused before routing it, as its audit row records it."""

    #: The JSON-RPC or gRPC method, or the HTTP method and path when the request named none.
    method: str
    #: What was wrong, as a fixed label (never the input).
    problem: str
    transport: str
    #: The tool a ``tools/call`` named (any JSON value as sent); None for other methods.
    tool_name: object = None
    code: ErrorCode = ErrorCode.VALIDATION_ERROR
    #: More of what was refused, for the row's metadata (bounded values, never the input).
    details: Mapping[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """The audit row's metadata key for the problem: ``malformed`` for invalid input."""
        return "malformed" if self.status is CallStatus.INVALID else "refused"

    @property
    def status(self) -> CallStatus:
        """Malformed input is invalid, a dependency that failed an error, the rest denied."""
        if self.code is ErrorCode.VALIDATION_ERROR:
            return CallStatus.INVALID
        if self.code is ErrorCode.DEPENDENCY_ERROR:
            return CallStatus.ERROR
        return CallStatus.DENIED


@dataclass(frozen=True)
class Unidentified:
    """Who sent a request refused before an agent was identified: the ids it sent that are
    usable (generated otherwise) and what is known of its credential."""

    request_id: str
    session_id: str
    credential: Credential | None = NO_CREDENTIAL
    call_id: str = field(default_factory=new_call_id)


@dataclass(frozen=True)
class ListedTool:
    """A tool as a listing shows it: the latest version under its bare name, an older version
    (callable through a grant pinned to it) as ``name.vN``, which calls exactly that version
    (MCP tool names cannot hold the ":" of the id ``name:vN``)."""

    name: str
    tool: AnyTool


@dataclass
class _Trace:
    """What the audit row of a call will say; filled in as the call goes."""

    principal: Principal
    tool: AnyTool | None
    tool_id: str | None
    transport: str
    started: float = field(default_factory=time.perf_counter)
    timestamp: datetime = field(default_factory=lambda: datetime.now(UTC))
    resource: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    #: The policy's decision once made; a call stopped before it is recorded as denied.
    decision: Decision = Decision.DENY
    #: Snapshot of the learner data the call returned, when it returned any.
    input_ref: str | None = None
    #: Done once the call's audit row is stored (see :meth:`AuditLog.settle`).
    stored: asyncio.Future[bool] | None = None
    #: The method the row names; a call's, unless an edge refused something else.
    method: str | None = None


_AUDITABLE_NAME = re.compile(r"[A-Za-z0-9_.:*-]{1,128}")


def audit_name(name: object) -> str | None:
    """The requested name of an unknown tool as the audit row keeps it: a plausible tool name
    as is, any other string (overlong, odd characters, possibly data) only as a digest; None
    when no name came (absent, empty or not a string)."""
    if not isinstance(name, str) or not name:
        return None
    if _AUDITABLE_NAME.fullmatch(name):
        return name
    return "invalid:" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def tool_facts(tool: AnyTool, registry: Registry) -> ToolFacts:
    """What the policy engine knows of a tool, its parts' own facts included. One level is
    enough, and keeps two tools returning the same data, each a part of the other, finite: a
    tool's parts already include their own parts (the registrations contract checks it)."""
    parts = tuple(
        ToolFacts(part.tool_id, part.name, part.risk, part.mode)
        for name in tool.parts
        if (part := registry.resolve(name)) is not None
    )
    return ToolFacts(tool.tool_id, tool.name, tool.risk, tool.mode, parts)


def validation_error(error: ValidationError) -> ToolError:
    """Which fields are wrong and why; never the values the agent sent."""
    problems = [
        {"field": ".".join(str(part) for part in e["loc"]) or "(arguments)", "problem": e["msg"]}
        for e in error.errors(include_url=False, include_input=False)
    ]
    return ToolError(
        ErrorCode.VALIDATION_ERROR,
        "the arguments do not match the tool's input schema",
        details={"errors": problems},
    )


def _mentions(text: str, identifier: str) -> bool:
    """Whether ``identifier`` occurs in ``text`` as a whole token, in any case ("L-2041-1" is in
    "x_l-2041-1", not in "L-2041-10")."""
    pattern = mention_pattern((identifier,))
    return pattern is not None and pattern.search(text) is not None


class ToolRouter:
    """Routes calls for both edges; one instance per process."""

    def __init__(
        self,
        *,
        registry: Registry,
        approvals: CallApprovals,
        audit: AuditLog,
        services: Services,
        environment: str,
        limiter: CallLimiter,
    ) -> None:
        self._registry = registry
        self._approvals = approvals
        self._audit = audit
        self._services = services
        self._environment = environment
        self._limiter = limiter
        self._facts = {tool.tool_id: tool_facts(tool, registry) for tool in registry.versions()}
        # Every version, by name and newest first, each with the name a listing shows it under.
        self._listing = [
            ListedTool(
                tool.name
                if registry.resolve(tool.name) is tool
                else listed_version_name(tool.tool_id),
                tool,
            )
            for tool in sorted(registry.versions(), key=lambda tool: (tool.name, -tool.version))
        ]

    def list_tools(self, principal: Principal, rules: AgentRules) -> list[ListedTool]:
        """Exactly the tool versions the agent may call as far as rules 1 to 3 and the
        credential's scopes go, by name and newest version first: a grant pinned to an older
        version lists that version too."""
        return [
            listed
            for listed in self._listing
            if principal.credential.allows(listed.tool.scope)
            and visible(
                Request(
                    agent_id=principal.agent_id,
                    tool=self._facts[listed.tool.tool_id],
                    grants=rules.grants,
                    policies=(),
                    environment=self._environment,
                )
            )
        ]

    async def call(
        self,
        principal: Principal,
        rules: AgentRules,
        name: str,
        arguments: Mapping[str, Any] | None,
        *,
        transport: str,
    ) -> CallOutcome:
        """Run one call through every check; always returns, and always audits: the answer comes
        once the call's audit row is stored (within the audit log's bound)."""
        tool = self._registry.resolve(name)
        record = _Trace(principal, tool, tool.tool_id if tool else audit_name(name), transport)
        record.method = CALL_METHODS[transport]
        outcome = await self._call(record, rules, tool, name, arguments)
        await self._audit.settle(record.stored)
        return outcome

    async def _call(
        self,
        record: _Trace,
        rules: AgentRules,
        tool: AnyTool | None,
        name: str,
        arguments: Mapping[str, Any] | None,
    ) -> CallOutcome:
        principal = record.principal
        admission = await self._limiter.admit(
            principal,
            tool.name if tool else "",
            writes=tool is not None and tool.mode is Mode.WRITE,
        )
        if admission.local:
            record.metadata["limits"] = "local"
        if not admission.admitted:
            return self._not_admitted(record, admission)
        if tool is None:
            return self._finish(record, Decision.DENY, CallStatus.NOT_FOUND, error=_no_tool(name))
        if not any(grant_covers_tool(grant, self._facts[tool.tool_id]) for grant in rules.grants):
            # Rule 1, decided before the arguments are looked at: a tool the agent holds no grant
            # for answers exactly as one that does not exist, and as fast, so an agent cannot
            # map the registry by probing. The audit row says what really happened.
            record.metadata.update({"rule": 1, "answered_as": "unknown tool"})
            refused = ToolError(
                ErrorCode.AUTHORIZATION_ERROR, "the agent holds no grant for this tool"
            )
            self._finish(record, Decision.DENY, CallStatus.DENIED, error=refused)
            return CallOutcome(None, CallStatus.NOT_FOUND, Decision.DENY, error=_no_tool(name))
        if not principal.credential.allows(tool.scope):
            # Granted, but not consented to: the token may be renewed with the scope.
            record.metadata.update({"rule": "scope", "required_scope": tool.scope.value})
            return self._finish(
                record, Decision.DENY, CallStatus.DENIED, error=insufficient_scope(tool.scope)
            )
        try:
            return await self._route(record, rules, tool, {} if arguments is None else arguments)
        except asyncio.CancelledError:
            # Cancelled mid-call (client gone, or shutdown past its grace): still one audit row.
            self._finish(record, record.decision, CallStatus.ERROR, error=internal_error())
            raise
        except Exception:
            logger.exception("tool call failed unexpectedly", extra={"tool_id": tool.tool_id})
            return self._finish(record, Decision.DENY, CallStatus.ERROR, error=internal_error())

    async def refuse(self, principal: Principal | Unidentified, refusal: Refusal) -> None:
        """Audit a request its edge refused before it could be routed: a malformed call (its
        arguments not an object, no tool name), a request that is no tool call, a refused
        credential (``principal`` is then :class:`Unidentified`). The sender got a protocol
        error; the log still shows the attempt. Returns once the row is stored (within the
        audit log's bound), as a call does."""
        name = refusal.tool_name
        tool = self._registry.resolve(name) if isinstance(name, str) and name else None
        metadata = {
            "transport": refusal.transport,
            refusal.label: refusal.problem,
            **refusal.details,
        }
        if isinstance(principal, Unidentified):
            entry = self._unidentified_entry(principal, tool, name, refusal, metadata)
            await self._audit.settle(self._audit.record(entry))
            return
        record = _Trace(
            principal, tool, tool.tool_id if tool else audit_name(name), refusal.transport
        )
        record.method = refusal.method
        record.metadata.update({refusal.label: refusal.problem, **refusal.details})
        error = ToolError(refusal.code, f"{refusal.label}: {refusal.problem}")
        self._finish(record, Decision.DENY, refusal.status, error=error)
        await self._audit.settle(record.stored)

    def _unidentified_entry(
        self,
        sender: Unidentified,
        tool: AnyTool | None,
        name: object,
        refusal: Refusal,
        metadata: dict[str, Any],
    ) -> AuditEntry:
        credential = sender.credential
        return AuditEntry(
            request_id=sender.request_id,
            timestamp=datetime.now(UTC),
            agent_id=None,
            session_id=sender.session_id,
            user_id=None,
            tool_id=tool.tool_id if tool else audit_name(name),
            resource=None,
            decision=Decision.DENY,
            status=refusal.status,
            error_code=refusal.code,
            duration_ms=0.0,
            environment=self._environment,
            metadata=metadata,
            call_id=sender.call_id,
            method=refusal.method,
            **_credential_columns(credential),
        )

    def _not_admitted(self, record: _Trace, admission: Admission) -> CallOutcome:
        """A call a limit refused, or one that writes while the limits cannot be checked."""
        if admission.unavailable:
            record.metadata["limits"] = "unavailable"
            unchecked = ToolError(
                ErrorCode.DEPENDENCY_ERROR,
                "the call limits cannot be checked now; nothing was done, retry later",
                retryable=True,
            )
            return self._finish(record, Decision.DENY, CallStatus.ERROR, error=unchecked)
        details: dict[str, Any] = {"retry_after_seconds": round(admission.retry_after, 3)}
        message = "too many calls; slow down"
        if admission.limit is not None:
            record.metadata["limit"] = details["limit"] = admission.limit.name
            message = describe(admission.limit)
        limited = ToolError(ErrorCode.RATE_LIMITED, message, details=details)
        return self._finish(record, Decision.DENY, CallStatus.DENIED, error=limited)

    async def _route(
        self, record: _Trace, rules: AgentRules, tool: AnyTool, arguments: Mapping[str, Any]
    ) -> CallOutcome:
        principal = record.principal
        try:
            args = tool.input_model.model_validate(arguments)
        except ValidationError as invalid:
            return self._finish(
                record, Decision.DENY, CallStatus.INVALID, error=validation_error(invalid)
            )
        learner_id = tool.learner_id(args)
        record.resource = f"learner:{learner_id}" if learner_id else None

        verdict = self._decide(principal, rules, tool, record.resource or "")
        record.decision = verdict.decision
        record.metadata["rule"] = verdict.rule
        if verdict.policy is not None:
            record.metadata["policy"] = verdict.policy.versioned_name
        if verdict.decision is Decision.DENY:
            return self._finish(record, Decision.DENY, CallStatus.DENIED, error=_denial(verdict))

        reach = None
        if learner_id is not None:
            scopes = tuple(dict.fromkeys(grant.resource_scope for grant in verdict.grants))
            reach = LearnerReach(principal.user_id, principal.user_source, scopes)
            if not (tool.authorized_in_context and verdict.decision is Decision.ALLOW):
                try:
                    await self._authorize(learner_id, reach)
                except ToolError as refused:
                    return self._refused(record, refused)

        if verdict.decision is Decision.REQUIRE_APPROVAL:
            return await self._approved_call(record, tool, args, learner_id, verdict, reach)

        try:
            output = await self._execute(record, tool, args, learner_id, reach)
        except ToolError as failed:
            if failed.code is ErrorCode.AUTHORIZATION_ERROR:
                return self._refused(record, failed)
            return self._finish(record, verdict.decision, CallStatus.ERROR, error=failed)
        return self._finish(record, verdict.decision, CallStatus.SUCCESS, output=output)

    def _refused(self, record: _Trace, refused: ToolError) -> CallOutcome:
        """A call stopped by resource authorization (or by its dependency failing while
        deciding): denied, with the rule that refused it on the audit row."""
        record.metadata.update(refused.audit)
        status = (
            CallStatus.DENIED if refused.code is ErrorCode.AUTHORIZATION_ERROR else CallStatus.ERROR
        )
        return self._finish(record, Decision.DENY, status, error=refused)

    def _decide(
        self, principal: Principal, rules: AgentRules, tool: AnyTool, resource: str
    ) -> Verdict:
        """The policy verdict; the same question under the same rules gets the remembered
        answer (the function is pure)."""
        key = (tool.tool_id, resource)
        verdict = rules.verdicts.get(key)
        if verdict is None:
            verdict = evaluate(
                Request(
                    agent_id=principal.agent_id,
                    tool=self._facts[tool.tool_id],
                    grants=rules.grants,
                    policies=rules.policies,
                    environment=self._environment,
                    resource=resource,
                )
            )
            rules.remember(key, verdict)
        return verdict

    async def _authorize(self, learner_id: str, reach: LearnerReach) -> None:
        """Knowing a learner id is not access: one of the covering grants' scopes must reach it."""
        refusal = await self._services.context_service.check_access(learner_id, reach)
        if refusal is not None:
            raise not_reachable(refusal)

    async def _approved_call(
        self,
        record: _Trace,
        tool: AnyTool,
        args: Any,
        learner_id: str | None,
        verdict: Verdict,
        reach: LearnerReach | None,
    ) -> CallOutcome:
        """Run the call under an approval of exactly this call, which is used up only if the call
        succeeds; without one, return the pending request an operator must decide."""
        binding = bind_call(
            record.principal,
            tool.tool_id,
            args.model_dump(mode="json"),
            verdict.policy,
            record.resource,
        )

        async def run(approval: Approval, conn: Connection) -> dict[str, Any]:
            # Noted before the tool runs: a call cut short still names the approval it held.
            record.metadata["approval_id"] = approval.approval_id
            return await self._execute(record, tool, args, learner_id, reach, conn)

        ended = await self._approvals.run_or_request(
            binding, run, request_id=record.principal.request_id, deadline=caller_deadline()
        )
        if ended.requested is not None:
            record.metadata["approval_id"] = ended.requested
        return self._finish(
            record, Decision.REQUIRE_APPROVAL, ended.status, output=ended.output, error=ended.error
        )

    async def _execute(
        self,
        record: _Trace,
        tool: AnyTool,
        args: Any,
        learner_id: str | None,
        reach: LearnerReach | None,
        approval_connection: Connection | None = None,
    ) -> dict[str, Any]:
        _executions.add(1, {"nemo.tool.id": tool.tool_id})
        call = ToolCall(record.principal, self._services, approval_connection, reach=reach)
        try:
            result = await tool.execute(call, args)
            output: dict[str, Any] = tool.output_model.model_validate(result).model_dump(
                mode="json"
            )
        except ToolError:
            raise
        except asyncpg.QueryCanceledError:
            # The statement timeout of an approved call: its caller's deadline came first.
            raise out_of_time() from None
        except Exception:
            logger.exception("tool executor failed", extra={"tool_id": tool.tool_id})
            raise internal_error() from None
        if learner_id is not None and _mentions(json.dumps(output, ensure_ascii=False), learner_id):
            logger.error(
                "blocked a result naming the learner's id", extra={"tool_id": tool.tool_id}
            )
            raise internal_error()
        # Only a result the agent gets is on record as what it saw.
        record.input_ref = ",".join(call.input_refs) or None
        return output

    def _finish(
        self,
        record: _Trace,
        decision: Decision,
        status: CallStatus,
        *,
        output: dict[str, Any] | None = None,
        error: ToolError | None = None,
    ) -> CallOutcome:
        principal = record.principal
        record.stored = self._audit.record(
            AuditEntry(
                request_id=principal.request_id,
                timestamp=record.timestamp,
                agent_id=principal.agent_id,
                session_id=principal.session_id,
                user_id=principal.user_id,
                tool_id=record.tool_id,
                resource=record.resource,
                decision=decision,
                status=status,
                error_code=error.code if error else None,
                duration_ms=(time.perf_counter() - record.started) * 1000,
                environment=self._environment,
                metadata={"transport": record.transport, **record.metadata},
                call_id=principal.call_id,
                user_source=principal.user_source.value,
                input_ref=record.input_ref,
                method=record.method,
                **_credential_columns(principal.credential),
            )
        )
        return CallOutcome(
            tool=record.tool,
            status=status,
            decision=decision,
            output=output,
            error=error,
        )


def _credential_columns(credential: Credential | None) -> dict[str, Any]:
    """The audit row's description of a credential (None: not looked at)."""
    if credential is None:
        return {}
    return {
        "credential_kind": credential.kind.value,
        "token_id": credential.token_id,
        "client_id": credential.client_id,
        "subject": credential.subject,
        "scopes": None if credential.scopes is None else tuple(sorted(credential.scopes)),
    }


def insufficient_scope(scope: str) -> ToolError:
    """A granted tool outside the token's scopes; ``details.required_scope`` is what to ask for."""
    return ToolError(
        ErrorCode.AUTHORIZATION_ERROR,
        f"the access token lacks the scope {scope}: sign in again consenting to it",
        details={"required_scope": scope},
    )


def _no_tool(name: str) -> ToolError:
    return ToolError(ErrorCode.RESOURCE_NOT_FOUND, f"no tool {name!r}")


def _denial(verdict: Verdict) -> ToolError:
    assert verdict.code is not None  # noqa: S101  narrows the type: a denial has a code
    details: dict[str, Any] = {"rule": verdict.rule}
    if verdict.policy is not None:
        details["policy"] = verdict.policy.name
    return ToolError(verdict.code, verdict.reason, details=details)
