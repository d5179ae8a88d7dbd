"""The people's gRPC service: operators manage agent tokens and grants, decide approvals and read
the audit log; guardians see what agents did with the learners linked to them and revoke what
they authorised.

Only the ``operator`` and ``console`` callers reach it (:mod:`.acl`), and every method acts for
a person proven by their own credential (:mod:`.people`): a caller token alone acts for nobody.
Every call of an authenticated person is recorded with its outcome (:mod:`.admin_actions`).
Each handler stays thin: it checks the request, calls one module and maps that module's errors
to statuses with their ``ErrorInfo`` reasons.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, timedelta
from typing import TypeVar

import grpc
from google.protobuf import duration_pb2

from nemo_core.callers import current_caller
from nemo_core.db import Pool
from nemo_core.errors import ServiceError
from nemo_core.page_tokens import InvalidPageToken
from nemo_core.people import canonical_id
from nemo_core.proto_enums import from_proto, to_proto
from nemo_core.structs import python_to_struct
from nemo_protos.context.v1 import context_service_pb2 as context_pb
from nemo_protos.toolplane.v1 import approval_pb2, audit_pb2
from nemo_protos.toolplane.v1 import toolplane_admin_service_pb2 as admin_pb
from nemo_protos.toolplane.v1 import toolplane_admin_service_pb2_grpc as admin_pb_grpc
from nemo_protos.toolplane.v1.error_reason_pb2 import ErrorReason
from nemo_protos.type.v1 import user_source_pb2
from nemo_toolplane import administration, guardians, tokens
from nemo_toolplane.admin_actions import OK, record_action
from nemo_toolplane.approvals import (
    Approval,
    ApprovalError,
    ApprovalNotFound,
    ApprovalNotPending,
    ApprovalStatus,
    ApprovalStore,
    Decider,
    NotAnApprover,
    SelfApproval,
)
from nemo_toolplane.audit.log import CallStatus
from nemo_toolplane.audit.query import (
    AuditFilter,
    StoredAuditEntry,
    decode_page_token,
    encode_page_token,
    list_entries,
)
from nemo_toolplane.context_client import ContextClient, user_source
from nemo_toolplane.decisions import Decision
from nemo_toolplane.envelope import ErrorCode, ToolError
from nemo_toolplane.errors import invalid_argument, service_error
from nemo_toolplane.people import PeopleAuthenticator, Person, PersonRefused, RefusalKind
from nemo_toolplane.principal import CredentialKind, UserSource
from nemo_toolplane.registry import Registry
from nemo_toolplane.rules.cache import RulesCache
from nemo_toolplane.wire import Context, bearer, decision_message, timestamp

T = TypeVar("T")

#: How a guardian must be linked to a learner to decide approvals about them.
_GUARDIAN_BASES = frozenset(
    {context_pb.ACCESS_BASIS_FAMILY_MEMBER, context_pb.ACCESS_BASIS_GUARDIAN}
)


class ToolPlaneAdminServicer(admin_pb_grpc.ToolPlaneAdminServiceServicer):
    """The people's API: every method acts for the person the credential proves."""

    def __init__(
        self,
        pool: Pool,
        approvals: ApprovalStore,
        rules: RulesCache,
        people: PeopleAuthenticator,
        context: ContextClient,
        registry: Registry,
    ) -> None:
        self._pool = pool
        self._approvals = approvals
        self._rules = rules
        self._people = people
        self._context = context
        self._registry = registry

    async def _person(self, context: Context) -> Person:
        try:
            return await self._people.authenticate(bearer(context))
        except PersonRefused as refused:
            if refused.kind is RefusalKind.UNVERIFIABLE:
                raise service_error(
                    grpc.StatusCode.UNAVAILABLE, ErrorReason.PERSON_UNVERIFIABLE, refused.message
                ) from None
            raise service_error(
                grpc.StatusCode.UNAUTHENTICATED,
                ErrorReason.OPERATOR_UNAUTHENTICATED,
                refused.message,
            ) from None

    async def _act(
        self,
        context: Context,
        action: str,
        target: str,
        work: Callable[[Person], Awaitable[T]],
        *,
        operators_only: bool = True,
    ) -> T:
        """Run ``work`` for the person the call proves, and record what they did."""
        person = await self._person(context)
        try:
            if operators_only and person.operator is None:
                raise service_error(
                    grpc.StatusCode.PERMISSION_DENIED,
                    ErrorReason.NOT_AN_OPERATOR,
                    "only operators may do this; you are signed in, but no operator is linked "
                    "to your account",
                )
            result = await work(person)
        except ServiceError as refused:
            await self._record(person, action, target, refused.reason)
            raise
        except ToolError as failed:
            error = _dependency_error(failed)
            await self._record(person, action, target, error.reason)
            raise error from None
        await self._record(person, action, target, OK)
        return result

    async def _record(self, person: Person, action: str, target: str, outcome: str) -> None:
        await record_action(
            self._pool, person, caller=current_caller(), action=action, target=target,
            outcome=outcome,
        )  # fmt: skip

    async def IssueAgentToken(
        self, request: admin_pb.IssueAgentTokenRequest, context: Context
    ) -> admin_pb.IssueAgentTokenResponse:
        async def issue(person: Person) -> admin_pb.IssueAgentTokenResponse:
            if not request.agent_id:
                raise invalid_argument(
                    ErrorReason.AGENT_REQUIRED, "name the agent to issue a token for"
                )
            try:
                async with self._pool.acquire() as conn:
                    issued = await tokens.issue_token(
                        conn,
                        request.agent_id,
                        user_id=request.user_id or None,
                        label=request.label,
                        unbound=request.unbound,
                        issued_by=person.name,
                    )
            except tokens.UnknownAgent as missing:
                raise service_error(
                    grpc.StatusCode.NOT_FOUND, ErrorReason.AGENT_NOT_FOUND, str(missing)
                ) from None
            except tokens.AgentNotActive as disabled:
                raise service_error(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    ErrorReason.AGENT_NOT_ACTIVE,
                    str(disabled),
                ) from None
            except tokens.UserRequired as unbound:
                raise service_error(
                    grpc.StatusCode.FAILED_PRECONDITION, ErrorReason.USER_REQUIRED, str(unbound)
                ) from None
            return admin_pb.IssueAgentTokenResponse(
                token_id=issued.token_id, token=issued.token, reach=issued.reach
            )

        return await self._act(context, "IssueAgentToken", request.agent_id, issue)

    async def RevokeAgentToken(
        self, request: admin_pb.RevokeAgentTokenRequest, context: Context
    ) -> admin_pb.RevokeAgentTokenResponse:
        async def revoke(person: Person) -> admin_pb.RevokeAgentTokenResponse:
            if not request.token_id:
                raise invalid_argument(ErrorReason.TOKEN_REQUIRED, "name the token to revoke")
            try:
                async with self._pool.acquire() as conn:
                    revoked_at = await tokens.revoke_token(
                        conn, request.token_id, revoked_by=person.name
                    )
            except tokens.UnknownToken as missing:
                raise service_error(
                    grpc.StatusCode.NOT_FOUND, ErrorReason.TOKEN_NOT_FOUND, str(missing)
                ) from None
            # Other replicas learn of it from the database notification; this one need not wait.
            self._rules.invalidate()
            return admin_pb.RevokeAgentTokenResponse(revoke_time=timestamp(revoked_at))

        return await self._act(context, "RevokeAgentToken", request.token_id, revoke)

    async def ListApprovals(
        self, request: admin_pb.ListApprovalsRequest, context: Context
    ) -> admin_pb.ListApprovalsResponse:
        async def listing(person: Person) -> admin_pb.ListApprovalsResponse:
            limit = _page_size(request.page_size, 50, 200)
            status = from_proto(
                approval_pb2.ApprovalStatus, "APPROVAL_STATUS_", ApprovalStatus, request.status
            )
            try:
                approvals, next_token = await self._approvals.list(
                    status=status, limit=limit, after=request.page_token or None
                )
            except ApprovalError as invalid:
                raise invalid_argument(ErrorReason.INVALID_PAGE_TOKEN, str(invalid)) from None
            return admin_pb.ListApprovalsResponse(
                approvals=[approval_message(a) for a in approvals],
                next_page_token=next_token or "",
            )

        return await self._act(context, "ListApprovals", "", listing)

    async def DecideApproval(
        self, request: admin_pb.DecideApprovalRequest, context: Context
    ) -> admin_pb.DecideApprovalResponse:
        async def decide(person: Person) -> admin_pb.DecideApprovalResponse:
            if not request.approval_id:
                raise invalid_argument(
                    ErrorReason.APPROVAL_ID_REQUIRED, "name the approval to decide"
                )
            if request.decision == admin_pb.APPROVAL_DECISION_UNSPECIFIED:
                raise invalid_argument(ErrorReason.DECISION_REQUIRED, "decide APPROVE or REJECT")
            named = request.operator.strip()
            if named and named != person.name:
                raise invalid_argument(
                    ErrorReason.OPERATOR_MISMATCH,
                    "the operator named is not the one the credential proves",
                )
            decider = await self._decider(person, request.approval_id)
            try:
                approval = await self._approvals.decide(
                    request.approval_id,
                    approve=request.decision == admin_pb.APPROVAL_DECISION_APPROVE,
                    decider=decider,
                    note=request.note,
                )
            except ApprovalNotFound as missing:
                raise _approval_not_found(missing) from None
            except SelfApproval as own:
                raise service_error(
                    grpc.StatusCode.PERMISSION_DENIED, ErrorReason.SELF_APPROVAL, str(own)
                ) from None
            except NotAnApprover as other:
                raise _not_an_approver(str(other), other.approvers) from None
            except ApprovalNotPending as decided:
                raise service_error(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    ErrorReason.APPROVAL_NOT_PENDING,
                    str(decided),
                ) from None
            return admin_pb.DecideApprovalResponse(approval=approval_message(approval))

        return await self._act(
            context, "DecideApproval", request.approval_id, decide, operators_only=False
        )

    async def _decider(self, person: Person, approval_id: str) -> Decider:
        """Who decides: the operator the person is, else the person as a guardian of the
        learner the approval is about, when the context service says they are one."""
        if person.operator is not None:
            operator = person.operator
            return Decider(operator.operator_id, operator.token_id, operator.identities)
        try:
            approval = await self._approvals.get(approval_id)
        except ApprovalNotFound as missing:
            raise _approval_not_found(missing) from None
        learner_id = (approval.resource or "").removeprefix("learner:")
        user_id = person.user_id or ""
        if not approval.resource or learner_id == approval.resource or not user_id:
            raise _not_an_approver("only operators decide approvals about no learner", ())
        basis = await self._context.access_basis(learner_id, user_id)
        if basis not in _GUARDIAN_BASES:
            raise _not_an_approver("you are not a guardian of the learner", approval.approvers)
        return Decider(
            user_id,
            f"oauth:{person.credential_id or ''}",
            frozenset({canonical_id(user_id)}),
            as_guardian=True,
        )

    async def ListAuditEntries(
        self, request: admin_pb.ListAuditEntriesRequest, context: Context
    ) -> admin_pb.ListAuditEntriesResponse:
        async def search(person: Person) -> admin_pb.ListAuditEntriesResponse:
            limit = _page_size(request.page_size, 100, 500)
            before_id = _before_id(request.page_token)
            since = request.start_time.ToDatetime(UTC) if request.HasField("start_time") else None
            until = request.end_time.ToDatetime(UTC) if request.HasField("end_time") else None
            if since is not None and until is not None and until < since:
                raise invalid_argument(
                    ErrorReason.INVALID_TIME_RANGE, "end_time must not be before start_time"
                )
            resource = None
            if request.learner_ref:
                learner_id = await self._learner(
                    guardians.reachable_learner_id, person, request.learner_ref
                )
                resource = guardians.learner_resource(learner_id)
            decision = from_proto(audit_pb2.Decision, "DECISION_", Decision, request.decision)
            found = AuditFilter(
                agent_id=request.agent_id or None,
                request_id=request.request_id or None,
                user_id=request.user_id or None,
                resource=resource,
                tool_ids=self._tool_ids(request.tool_id),
                decision=decision.value if decision else None,
                since=since,
                until=until,
            )
            entries, next_id = await list_entries(
                self._pool, found, before_id=before_id, limit=limit
            )
            return admin_pb.ListAuditEntriesResponse(
                entries=[_audit_message(entry) for entry in entries],
                next_page_token=encode_page_token(next_id) if next_id else "",
            )

        return await self._act(context, "ListAuditEntries", "", search)

    def _tool_ids(self, tool: str) -> tuple[str, ...] | None:
        """Every stored id a tool filter matches: a versioned id itself, a name each version
        the registry has (or the name, as unknown tools are recorded)."""
        if not tool:
            return None
        if ":" in tool:
            return (tool,)
        versions = tuple(
            definition.tool_id
            for definition in self._registry.versions()
            if definition.name == tool
        )
        return versions or (tool,)

    async def _learner(
        self,
        resolve: Callable[[ContextClient, str, str], Awaitable[str]],
        person: Person,
        learner_ref: str,
    ) -> str:
        try:
            return await resolve(self._context, person.user_id or "", learner_ref)
        except guardians.InvalidLearnerRef as invalid:
            raise invalid_argument(ErrorReason.INVALID_LEARNER_REF, str(invalid)) from None
        except guardians.NotLinked as refused:
            raise service_error(
                grpc.StatusCode.PERMISSION_DENIED, ErrorReason.LEARNER_NOT_LINKED, str(refused)
            ) from None

    async def GetPerson(
        self, request: admin_pb.GetPersonRequest, context: Context
    ) -> admin_pb.GetPersonResponse:
        async def who(person: Person) -> admin_pb.GetPersonResponse:
            return admin_pb.GetPersonResponse(
                user_id=person.user_id or "",
                operator_id=person.operator.operator_id if person.operator else "",
                credential_kind=person.credential_kind.value,
            )

        return await self._act(context, "GetPerson", "", who, operators_only=False)

    async def ListAgents(
        self, request: admin_pb.ListAgentsRequest, context: Context
    ) -> admin_pb.ListAgentsResponse:
        async def listing(person: Person) -> admin_pb.ListAgentsResponse:
            agents = await administration.list_agents(self._pool)
            return admin_pb.ListAgentsResponse(agents=[_agent_message(agent) for agent in agents])

        return await self._act(context, "ListAgents", "", listing)

    async def CreateGrant(
        self, request: admin_pb.CreateGrantRequest, context: Context
    ) -> admin_pb.CreateGrantResponse:
        async def create(person: Person) -> admin_pb.CreateGrantResponse:
            if not request.agent_id or not request.tool_pattern.strip():
                raise _invalid_grant("name the agent and the tool pattern")
            try:
                grant = await administration.create_grant(
                    self._pool,
                    agent_id=request.agent_id,
                    tool_pattern=request.tool_pattern.strip(),
                    resource_scope=request.resource_scope.strip() or "user",
                    environment_scope=request.environment_scope.strip() or "*",
                    permission=request.permission,
                    created_by=person.name,
                )
            except administration.UnknownAgentForGrant as missing:
                raise service_error(
                    grpc.StatusCode.NOT_FOUND, ErrorReason.AGENT_NOT_FOUND, str(missing)
                ) from None
            except administration.InvalidGrant as refused:
                raise _invalid_grant(str(refused)) from None
            self._rules.invalidate()
            return admin_pb.CreateGrantResponse(grant=_grant_message(grant))

        return await self._act(context, "CreateGrant", request.agent_id, create)

    async def DeleteGrant(
        self, request: admin_pb.DeleteGrantRequest, context: Context
    ) -> admin_pb.DeleteGrantResponse:
        async def delete(person: Person) -> admin_pb.DeleteGrantResponse:
            try:
                await administration.delete_grant(self._pool, request.grant_id)
            except administration.UnknownGrant as missing:
                raise service_error(
                    grpc.StatusCode.NOT_FOUND, ErrorReason.GRANT_NOT_FOUND, str(missing)
                ) from None
            self._rules.invalidate()
            return admin_pb.DeleteGrantResponse()

        return await self._act(context, "DeleteGrant", str(request.grant_id), delete)

    async def ListPolicies(
        self, request: admin_pb.ListPoliciesRequest, context: Context
    ) -> admin_pb.ListPoliciesResponse:
        async def listing(person: Person) -> admin_pb.ListPoliciesResponse:
            policies = await administration.list_policies(self._pool)
            _, _, findings = await administration.dead_rules(self._pool, self._registry)
            return admin_pb.ListPoliciesResponse(
                policies=[
                    admin_pb.Policy(**{**row, "approvers": row["approvers"].split(",")})
                    for row in policies
                ],
                findings=[
                    admin_pb.PolicyFinding(
                        kind=finding.row.split(" ", 1)[0],
                        name=finding.row.split(" ", 1)[-1],
                        problem=finding.problem,
                    )
                    for finding in findings
                ],
            )

        return await self._act(context, "ListPolicies", "", listing)

    async def ListLinkedLearners(
        self, request: admin_pb.ListLinkedLearnersRequest, context: Context
    ) -> admin_pb.ListLinkedLearnersResponse:
        async def listing(person: Person) -> admin_pb.ListLinkedLearnersResponse:
            if not person.user_id:
                return admin_pb.ListLinkedLearnersResponse()
            learners = await self._context.linked_learners(person.user_id)
            return admin_pb.ListLinkedLearnersResponse(
                learners=[
                    admin_pb.LinkedLearner(
                        learner_ref=learner.learner_ref,
                        grade=learner.grade,
                        relation=guardians.relation_name(learner.relation),
                    )
                    for learner in learners
                ]
            )

        return await self._act(context, "ListLinkedLearners", "", listing, operators_only=False)

    async def ListLearnerActivity(
        self, request: admin_pb.ListLearnerActivityRequest, context: Context
    ) -> admin_pb.ListLearnerActivityResponse:
        async def activity(person: Person) -> admin_pb.ListLearnerActivityResponse:
            limit = _page_size(request.page_size, 100, 500)
            before_id = _before_id(request.page_token)
            learner_id = await self._learner(
                guardians.linked_learner_id, person, request.learner_ref
            )
            entries, next_id = await list_entries(
                self._pool,
                AuditFilter(resource=guardians.learner_resource(learner_id)),
                before_id=before_id,
                limit=limit,
            )
            return admin_pb.ListLearnerActivityResponse(
                entries=[_audit_message(entry) for entry in entries],
                next_page_token=encode_page_token(next_id) if next_id else "",
            )

        return await self._act(context, "ListLearnerActivity", "", activity, operators_only=False)

    async def ListLearnerApprovals(
        self, request: admin_pb.ListLearnerApprovalsRequest, context: Context
    ) -> admin_pb.ListLearnerApprovalsResponse:
        async def listing(person: Person) -> admin_pb.ListLearnerApprovalsResponse:
            learner_id = await self._learner(
                guardians.linked_learner_id, person, request.learner_ref
            )
            approvals, _ = await self._approvals.list(
                status=None, limit=200, after=None, resource=guardians.learner_resource(learner_id)
            )
            return admin_pb.ListLearnerApprovalsResponse(
                approvals=[approval_message(approval) for approval in approvals]
            )

        return await self._act(context, "ListLearnerApprovals", "", listing, operators_only=False)

    async def ListAuthorizations(
        self, request: admin_pb.ListAuthorizationsRequest, context: Context
    ) -> admin_pb.ListAuthorizationsResponse:
        async def listing(person: Person) -> admin_pb.ListAuthorizationsResponse:
            if not person.user_id:
                return admin_pb.ListAuthorizationsResponse()
            bound, hosts = await guardians.authorizations(self._pool, person.user_id)
            return admin_pb.ListAuthorizationsResponse(
                tokens=[_token_message(token) for token in bound],
                hosts=[_host_message(host) for host in hosts],
            )

        return await self._act(context, "ListAuthorizations", "", listing, operators_only=False)

    async def RevokeAuthorization(
        self, request: admin_pb.RevokeAuthorizationRequest, context: Context
    ) -> admin_pb.RevokeAuthorizationResponse:
        async def revoke(person: Person) -> admin_pb.RevokeAuthorizationResponse:
            user_id = person.user_id or ""
            try:
                if request.token_id and not request.client_id and user_id:
                    revoked_at = await guardians.revoke_bound_token(
                        self._pool, user_id, request.token_id
                    )
                elif request.client_id and not request.token_id and user_id:
                    revoked_at = await guardians.revoke_host(self._pool, user_id, request.client_id)
                else:
                    raise guardians.AuthorizationNotFound(
                        "name one agent token or one host of yours to revoke"
                    )
            except guardians.AuthorizationNotFound as missing:
                raise service_error(
                    grpc.StatusCode.NOT_FOUND, ErrorReason.AUTHORIZATION_NOT_FOUND, str(missing)
                ) from None
            self._rules.invalidate()
            return admin_pb.RevokeAuthorizationResponse(revoke_time=timestamp(revoked_at))

        target = request.token_id or request.client_id
        return await self._act(context, "RevokeAuthorization", target, revoke, operators_only=False)


def _dependency_error(failed: ToolError) -> ServiceError:
    """The context service's failure, as the people's API reports it."""
    if failed.code is ErrorCode.DEPENDENCY_ERROR:
        return service_error(
            grpc.StatusCode.UNAVAILABLE,
            ErrorReason.DEPENDENCY_UNAVAILABLE,
            "the context service is unavailable; retry later",
        )
    return service_error(grpc.StatusCode.INTERNAL, ErrorReason.INTERNAL, "internal error")


def _approval_not_found(missing: ApprovalNotFound) -> ServiceError:
    return service_error(grpc.StatusCode.NOT_FOUND, ErrorReason.APPROVAL_NOT_FOUND, str(missing))


def _not_an_approver(message: str, approvers: tuple[str, ...]) -> ServiceError:
    return service_error(
        grpc.StatusCode.PERMISSION_DENIED,
        ErrorReason.NOT_AN_APPROVER,
        message,
        {"approvers": ",".join(approvers) or "operator"},
    )


def _invalid_grant(problem: str) -> ServiceError:
    return service_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        ErrorReason.INVALID_GRANT,
        f"the grant is refused: {problem}",
        {"problem": problem},
    )


def _before_id(page_token: str) -> int | None:
    if not page_token:
        return None
    try:
        return decode_page_token(page_token)
    except InvalidPageToken as invalid:
        raise invalid_argument(ErrorReason.INVALID_PAGE_TOKEN, str(invalid)) from None


def approval_message(approval: Approval) -> approval_pb2.Approval:
    message = approval_pb2.Approval(
        approval_id=approval.approval_id,
        agent_id=approval.agent_id,
        user_id=approval.user_id or "",
        tool_id=approval.tool_id,
        arguments_sha256=approval.arguments_digest,
        policy_version=approval.policy_version,
        status=to_proto(approval_pb2.ApprovalStatus, "APPROVAL_STATUS_", approval.status),
        request_id=approval.request_id,
        create_time=timestamp(approval.created_at),
        expire_time=timestamp(approval.expires_at),
        decided_by=approval.decided_by or "",
        decision_note=approval.decision_note or "",
        arguments_json=approval.arguments_json or "",
        resource=approval.resource or "",
        token_id=approval.token_id or "",
        user_source=_user_source(approval.user_source),
        approvers=list(approval.approvers),
        token_issued_by=approval.token_issued_by or "",
    )
    if approval.decided_at is not None:
        message.decide_time.CopyFrom(timestamp(approval.decided_at))
    if approval.decide_by is not None:
        message.decide_deadline.CopyFrom(timestamp(approval.decide_by))
    return message


def _token_message(token: tokens.StoredToken) -> admin_pb.AgentToken:
    message = admin_pb.AgentToken(
        token_id=token.token_id,
        agent_id=token.agent_id,
        user_id=token.user_id or "",
        label=token.label,
        create_time=timestamp(token.created_at),
        issued_by=token.issued_by or "",
        revoked_by=token.revoked_by or "",
    )
    if token.revoked_at is not None:
        message.revoke_time.CopyFrom(timestamp(token.revoked_at))
    return message


def _host_message(host: guardians.Host) -> admin_pb.HostAuthorization:
    message = admin_pb.HostAuthorization(
        client_id=host.client_id,
        agent_id=host.agent_id,
        last_use_time=timestamp(host.last_used_at),
    )
    if host.revoked_at is not None:
        message.revoke_time.CopyFrom(timestamp(host.revoked_at))
    return message


def _grant_message(grant: administration.StoredGrant) -> admin_pb.Grant:
    return admin_pb.Grant(
        grant_id=grant.grant_id,
        agent_id=grant.agent_id,
        tool_pattern=grant.tool_pattern,
        resource_scope=grant.resource_scope,
        environment_scope=grant.environment_scope,
        permission=grant.permission,
        created_by=grant.created_by or "",
    )


def _agent_message(agent: administration.StoredAgent) -> admin_pb.Agent:
    return admin_pb.Agent(
        agent_id=agent.agent_id,
        name=agent.name,
        status=agent.status,
        description=agent.description,
        tokens=[_token_message(token) for token in agent.tokens],
        grants=[_grant_message(grant) for grant in agent.grants],
        oauth_client_ids=list(agent.oauth_client_ids),
    )


def _user_source(value: str | None) -> user_source_pb2.UserSource.ValueType:
    """A stored user source; unspecified on rows written before sources were kept."""
    return user_source(UserSource(value)) if value else user_source_pb2.USER_SOURCE_UNSPECIFIED


def _page_size(value: int, default: int, maximum: int) -> int:
    if value == 0:
        return default
    if not 1 <= value <= maximum:
        raise invalid_argument(
            ErrorReason.INVALID_PAGE_SIZE, f"page_size must be 0 or 1 to {maximum}"
        )
    return value


def _duration(milliseconds: float) -> duration_pb2.Duration:
    duration = duration_pb2.Duration()
    duration.FromTimedelta(timedelta(milliseconds=milliseconds))
    return duration


def _audit_message(entry: StoredAuditEntry) -> audit_pb2.AuditEntry:
    return audit_pb2.AuditEntry(
        audit_id=entry.audit_id,
        request_id=entry.request_id,
        create_time=timestamp(entry.timestamp),
        agent_id=entry.agent_id or "",
        session_id=entry.session_id or "",
        user_id=entry.user_id or "",
        tool_id=entry.tool_id or "",
        resource=entry.resource or "",
        decision=decision_message(Decision(entry.decision)),
        status=to_proto(audit_pb2.CallStatus, "CALL_STATUS_", CallStatus(entry.status)),
        error_code=entry.error_code or "",
        duration=_duration(entry.duration_ms or 0),
        environment=entry.environment,
        metadata=python_to_struct(dict(entry.metadata)),
        call_id=entry.call_id or "",
        token_id=entry.token_id or "",
        user_source=_user_source(entry.user_source),
        input_ref=entry.input_ref or "",
        method=entry.method or "",
        credential_kind=_credential_kind(entry.credential_kind),
        client_id=entry.client_id or "",
        subject=entry.subject or "",
        scopes=entry.scopes or [],
    )


def _credential_kind(kind: str | None) -> audit_pb2.CredentialKind.ValueType:
    if kind is None:
        return audit_pb2.CREDENTIAL_KIND_UNSPECIFIED
    return to_proto(audit_pb2.CredentialKind, "CREDENTIAL_KIND_", CredentialKind(kind))
