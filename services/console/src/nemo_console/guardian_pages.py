"""The guardians' pages: their children (named by pseudonym, never by key), what agents and hosts
read or did about each and for whom, what the AI saw in each read, approvals about the child,
what they authorised (with revoke), and export and erasure requests.

Which children a person sees is the context service's decision (the learners linked to them in
person); another family's child is refused by the services, and that refusal is the page.
"""

from __future__ import annotations

import secrets

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from nemo_console.backends import Refused
from nemo_console.sessions import Session
from nemo_console.views import approval_view, audit_row, moment, shown
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
from nemo_protos.context.v1 import rights_service_pb2 as rights_pb
from nemo_protos.toolplane.v1 import toolplane_admin_service_pb2 as admin_pb

_KINDS = {"export": rights_pb.RIGHTS_KIND_EXPORT, "erasure": rights_pb.RIGHTS_KIND_ERASURE}


@signed_in_page
async def family(request: Request, session: Session) -> Response:
    linked = await people_call(
        request, session, "ListLinkedLearners", admin_pb.ListLinkedLearnersRequest()
    )
    allowed = await people_call(
        request, session, "ListAuthorizations", admin_pb.ListAuthorizationsRequest()
    )
    return render(
        request,
        "family.html",
        {
            "learners": list(linked.learners),
            "tokens": [
                {
                    **MessageToDict(token, preserving_proto_field_name=True),
                    "created": shown(moment(token.create_time)),
                    "revoked": shown(moment(token.revoke_time)),
                }
                for token in allowed.tokens
            ],
            "hosts": [
                {
                    "client_id": host.client_id,
                    "agent_id": host.agent_id,
                    "last_use": shown(moment(host.last_use_time)),
                    "revoked": shown(moment(host.revoke_time)),
                }
                for host in allowed.hosts
            ],
        },
        session=session,
    )


@signed_in_page
async def child(request: Request, session: Session) -> Response:
    learner_ref = request.path_params["learner_ref"]
    activity = await people_call(
        request,
        session,
        "ListLearnerActivity",
        admin_pb.ListLearnerActivityRequest(
            learner_ref=learner_ref, page_size=50, page_token=request.query_params.get("page", "")
        ),
    )
    approvals = await people_call(
        request,
        session,
        "ListLearnerApprovals",
        admin_pb.ListLearnerApprovalsRequest(learner_ref=learner_ref),
    )
    backends = console_of(request).backends
    made = await backends.call(
        "context",
        backends.rights.ListRightsRequests,
        rights_pb.ListRightsRequestsRequest(learner_ref=learner_ref),
        session.access_token,
    )
    return render(
        request,
        "child.html",
        {
            "learner_ref": learner_ref,
            "entries": [audit_row(entry) for entry in activity.entries],
            "next_page": activity.next_page_token,
            "approvals": [approval_view(approval) for approval in approvals.approvals],
            "requests": [
                {
                    "request_id": r.request_id,
                    "kind": rights_pb.RightsKind.Name(r.kind).removeprefix("RIGHTS_KIND_").lower(),
                    "state": rights_pb.RightsState.Name(r.state)
                    .removeprefix("RIGHTS_STATE_")
                    .lower(),
                    "received": shown(moment(r.receive_time)),
                    "complete_by": shown(moment(r.complete_deadline)),
                }
                for r in made.requests
            ],
        },
        session=session,
    )


@signed_in_page
async def snapshot(request: Request, session: Session) -> Response:
    input_ref = request.query_params.get("ref", "")
    backends = console_of(request).backends
    read = await backends.call(
        "context",
        backends.context.GetSnapshot,
        context_pb.GetSnapshotRequest(input_ref=input_ref),
        session.access_token,
    )
    log_action(request, session, "read_snapshot", input_ref, "ok")
    bundle: Message = read.bundle if read.HasField("bundle") else read.conversation_bundle
    data = MessageToDict(bundle, preserving_proto_field_name=True)
    told = str(data.pop("rendered_text", ""))
    for envelope in (
        "input_ref",
        "snapshot_sha256",
        "learner_ref",
        "purpose",
        "build_time",
        "slices",
        "policy_version",
        "build_version",
        "locale",
    ):
        data.pop(envelope, None)
    return render(
        request,
        "snapshot.html",
        {
            "input_ref": read.input_ref,
            "sha256": read.sha256,
            "learner_ref": getattr(bundle, "learner_ref", ""),
            "purpose": getattr(bundle, "purpose", ""),
            "built": shown(moment(read.bundle.build_time)) if read.HasField("bundle") else "",
            "told": told,
            "data": data,
        },
        session=session,
    )


@signed_in_page
async def ask(request: Request, session: Session) -> Response:
    form = await checked_form(request, session)
    learner_ref = request.path_params["learner_ref"]
    kind = _KINDS.get(field(form, "kind"))
    if kind is None:
        raise Refused(400, "INVALID_RIGHTS_KIND", "ask for an export or an erasure", "console")
    request_id = f"console-{secrets.token_hex(8)}"
    backends = console_of(request).backends
    await backends.call(
        "context",
        backends.rights.SubmitRightsRequest,
        rights_pb.SubmitRightsRequestRequest(
            request_id=request_id, kind=kind, learner_ref=learner_ref
        ),
        session.access_token,
    )
    log_action(request, session, f"rights:{field(form, 'kind')}", learner_ref, "ok")
    return RedirectResponse(url(request, "child", learner_ref=learner_ref), status_code=303)


@signed_in_page
async def revoke(request: Request, session: Session) -> Response:
    form = await checked_form(request, session)
    message = admin_pb.RevokeAuthorizationRequest(
        token_id=field(form, "token_id"), client_id=field(form, "client_id")
    )
    await people_call(request, session, "RevokeAuthorization", message)
    log_action(
        request, session, "revoke_authorization", message.token_id or message.client_id, "ok"
    )
    return RedirectResponse(url(request, "family"), status_code=303)
