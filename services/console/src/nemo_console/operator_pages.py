"""The operators' pages: the approvals inbox, audit search with CSV export, agents with their
tokens and grants, the purpose table and the policies, the kill switch, the latest evaluation.

Each page asks the services as the signed-in person; whether that person may see or do it is the
services' decision (a person who is no operator gets the tool plane's refusal as a page).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from google.protobuf.json_format import MessageToDict
from starlette.requests import Request
from starlette.responses import FileResponse, RedirectResponse, Response, StreamingResponse

from nemo_console.backends import Refused
from nemo_console.evaluation import latest_report
from nemo_console.sessions import Session
from nemo_console.views import approval_view, audit_row
from nemo_console.web import (
    checked_form,
    console_of,
    field,
    log_action,
    people_call,
    render,
    signed_in_page,
    url,
)
from nemo_protos.context.v1 import context_service_pb2 as context_pb
from nemo_protos.gateway.v1 import gateway_service_pb2 as gateway_pb
from nemo_protos.toolplane.v1 import audit_pb2
from nemo_protos.toolplane.v1 import toolplane_admin_service_pb2 as admin_pb

#: Rows a CSV export holds at most (pages of 500).
CSV_MAX_ROWS = 10_000
_DECISIONS = {
    "allow": audit_pb2.DECISION_ALLOW,
    "deny": audit_pb2.DECISION_DENY,
    "require_approval": audit_pb2.DECISION_REQUIRE_APPROVAL,
}


@signed_in_page
async def approvals(request: Request, session: Session) -> Response:
    listed = await people_call(
        request,
        session,
        "ListApprovals",
        admin_pb.ListApprovalsRequest(
            page_size=100, page_token=request.query_params.get("page", "")
        ),
    )
    return render(
        request,
        "approvals.html",
        {
            "approvals": [approval_view(approval) for approval in listed.approvals],
            "next_page": listed.next_page_token,
        },
        session=session,
    )


@signed_in_page
async def approval(request: Request, session: Session) -> Response:
    approval_id = request.path_params["approval_id"]
    # The inbox lists pending requests first and is bounded; look the request up in it.
    page_token = ""
    while True:
        listed = await people_call(
            request,
            session,
            "ListApprovals",
            admin_pb.ListApprovalsRequest(page_size=200, page_token=page_token),
        )
        found = [a for a in listed.approvals if a.approval_id == approval_id]
        if found or not listed.next_page_token:
            break
        page_token = listed.next_page_token
    if not found:
        raise Refused(404, "APPROVAL_NOT_FOUND", "no approval has this id", "toolplane")
    return render(
        request,
        "approval.html",
        {"approval": approval_view(found[0]), "back": url(request, "approvals")},
        session=session,
    )


@signed_in_page
async def decide(request: Request, session: Session) -> Response:
    form = await checked_form(request, session)
    approval_id = request.path_params["approval_id"]
    choice = field(form, "decision")
    decision = {
        "approve": admin_pb.APPROVAL_DECISION_APPROVE,
        "reject": admin_pb.APPROVAL_DECISION_REJECT,
    }.get(choice, admin_pb.APPROVAL_DECISION_UNSPECIFIED)
    await people_call(
        request,
        session,
        "DecideApproval",
        admin_pb.DecideApprovalRequest(
            approval_id=approval_id, decision=decision, note=field(form, "note")
        ),
    )
    log_action(request, session, f"decide:{choice}", approval_id, "ok")
    back = field(form, "back")
    target = (
        back
        if back.startswith(f"{console_of(request).settings.root_path}/")
        else (url(request, "approval", approval_id=approval_id))
    )
    return RedirectResponse(target, status_code=303)


def _time(value: str, what: str) -> datetime | None:
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise Refused(400, "INVALID_TIME", f"{what} is not a date and time", "console") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _search(request: Request, page_size: int, page_token: str) -> admin_pb.ListAuditEntriesRequest:
    query = request.query_params
    search = admin_pb.ListAuditEntriesRequest(
        agent_id=query.get("agent", "").strip(),
        user_id=query.get("user", "").strip(),
        learner_ref=query.get("learner_ref", "").strip(),
        tool_id=query.get("tool", "").strip(),
        decision=_DECISIONS.get(query.get("decision", ""), audit_pb2.DECISION_UNSPECIFIED),
        page_size=page_size,
        page_token=page_token,
    )
    since, until = _time(query.get("from", ""), "from"), _time(query.get("to", ""), "to")
    if since is not None:
        search.start_time.FromDatetime(since)
    if until is not None:
        search.end_time.FromDatetime(until)
    return search


@signed_in_page
async def audit(request: Request, session: Session) -> Response:
    found = await people_call(
        request,
        session,
        "ListAuditEntries",
        _search(request, 50, request.query_params.get("page", "")),
    )
    filters = {key: value for key, value in request.query_params.items() if key != "page" and value}
    return render(
        request,
        "audit.html",
        {
            "entries": [audit_row(entry) for entry in found.entries],
            "next_page": found.next_page_token,
            "filters": filters,
            "decisions": list(_DECISIONS),
        },
        session=session,
    )


CSV_COLUMNS = (
    "time",
    "request_id",
    "agent_id",
    "user_id",
    "user_source",
    "tool_id",
    "resource",
    "decision",
    "status",
    "error_code",
    "duration_ms",
    "credential_kind",
    "client_id",
    "token_id",
    "input_ref",
)


@signed_in_page
async def audit_csv(request: Request, session: Session) -> Response:
    # The first page is asked before the answer starts, so a refusal is still a page.
    first = await people_call(request, session, "ListAuditEntries", _search(request, 500, ""))
    log_action(request, session, "export_audit", "", "ok")

    async def rows() -> AsyncIterator[str]:
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(CSV_COLUMNS)
        page, written = first, 0
        while True:
            for entry in page.entries:
                row = audit_row(entry)
                writer.writerow([row[column] for column in CSV_COLUMNS])
                written += 1
            yield out.getvalue()
            out.seek(0)
            out.truncate()
            if not page.next_page_token or written >= CSV_MAX_ROWS:
                return
            page = await people_call(
                request,
                session,
                "ListAuditEntries",
                _search(request, 500, page.next_page_token),
            )

    return StreamingResponse(
        rows(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": 'attachment; filename="audit.csv"'},
    )


@signed_in_page
async def agents(request: Request, session: Session) -> Response:
    listed = await people_call(request, session, "ListAgents", admin_pb.ListAgentsRequest())
    return render(
        request,
        "agents.html",
        {
            "agents": [
                MessageToDict(agent, preserving_proto_field_name=True) for agent in listed.agents
            ]
        },
        session=session,
    )


@signed_in_page
async def issue_token(request: Request, session: Session) -> Response:
    form = await checked_form(request, session)
    issued = await people_call(
        request,
        session,
        "IssueAgentToken",
        admin_pb.IssueAgentTokenRequest(
            agent_id=field(form, "agent_id"),
            user_id=field(form, "user_id"),
            label=field(form, "label"),
            unbound=field(form, "unbound") == "on",
        ),
    )
    log_action(request, session, "issue_token", issued.token_id, "ok")
    listed = await people_call(request, session, "ListAgents", admin_pb.ListAgentsRequest())
    return render(
        request,
        "agents.html",
        {
            "agents": [MessageToDict(a, preserving_proto_field_name=True) for a in listed.agents],
            "issued": issued,
        },
        session=session,
    )


async def _act_and_return(
    request: Request, session: Session, method: str, message: Any, action: str, target: str
) -> Response:
    await people_call(request, session, method, message)
    log_action(request, session, action, target, "ok")
    return RedirectResponse(url(request, "agents"), status_code=303)


@signed_in_page
async def revoke_token(request: Request, session: Session) -> Response:
    await checked_form(request, session)
    token_id = request.path_params["token_id"]
    return await _act_and_return(
        request,
        session,
        "RevokeAgentToken",
        admin_pb.RevokeAgentTokenRequest(token_id=token_id),
        "revoke_token",
        token_id,
    )


@signed_in_page
async def create_grant(request: Request, session: Session) -> Response:
    form = await checked_form(request, session)
    message = admin_pb.CreateGrantRequest(
        agent_id=field(form, "agent_id"),
        tool_pattern=field(form, "tool_pattern"),
        resource_scope=field(form, "resource_scope"),
        environment_scope=field(form, "environment_scope"),
        permission=field(form, "permission"),
    )
    return await _act_and_return(
        request, session, "CreateGrant", message, "create_grant", message.agent_id
    )


@signed_in_page
async def delete_grant(request: Request, session: Session) -> Response:
    await checked_form(request, session)
    grant_id = int(request.path_params["grant_id"])
    return await _act_and_return(
        request,
        session,
        "DeleteGrant",
        admin_pb.DeleteGrantRequest(grant_id=grant_id),
        "delete_grant",
        str(grant_id),
    )


@signed_in_page
async def policies(request: Request, session: Session) -> Response:
    backends = console_of(request).backends
    listed = await people_call(request, session, "ListPolicies", admin_pb.ListPoliciesRequest())
    purposes = await backends.call(
        "context",
        backends.context.ListPurposes,
        context_pb.ListPurposesRequest(),
        session.access_token,
    )
    prompts = await backends.call(
        "gateway",
        backends.gateway.ListPrompts,
        gateway_pb.ListPromptsRequest(),
        session.access_token,
    )
    return render(
        request,
        "policies.html",
        {
            "policies": [
                MessageToDict(p, preserving_proto_field_name=True) for p in listed.policies
            ],
            "findings": list(listed.findings),
            "purposes": [
                MessageToDict(p, preserving_proto_field_name=True) for p in purposes.purposes
            ],
            "policy_version": purposes.policy_version,
            "ai_on": prompts.ai_enrichment_enabled,
            "prompt_count": len(prompts.prompts),
        },
        session=session,
    )


@signed_in_page
async def evaluation(request: Request, session: Session) -> Response:
    # Operators only, as the rest of these pages: the tool plane says who is one.
    await people_call(request, session, "ListPolicies", admin_pb.ListPoliciesRequest())
    report = latest_report(console_of(request).settings.eval_dir)
    return render(request, "evaluation.html", {"report": report}, session=session)


@signed_in_page
async def evaluation_chart(request: Request, session: Session) -> Response:
    await people_call(request, session, "ListPolicies", admin_pb.ListPoliciesRequest())
    report = latest_report(console_of(request).settings.eval_dir)
    if report is None or report.chart is None:
        raise Refused(404, "NO_REPORT", "no evaluation chart", "console")
    return FileResponse(report.chart, media_type="image/png")


def summary_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
