"""Which caller may use which RPC of the context service.

The gateway builds prompt and conversation context, records turns and stores generated items in
the item bank; the tool plane reads agent
views, checks learner access and users (the subjects of OAuth tokens) and searches knowledge;
the audit caller reads snapshots; the platform records a person's data rights requests
(RightsService); the console reads snapshots and records and lists rights requests, each time for
the person whose access token it passes on (:mod:`nemo_context.people`), within what that
person may reach.
The second table says which kinds of purpose each caller may build: prompt and conversation
purposes for the gateway, agent views for the tool plane.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

import grpc

from nemo_context.errors import service_error
from nemo_context.purposes import AGENT_VIEW, CONVERSATION, PROMPT, Purpose
from nemo_core.callers import CallerAcl
from nemo_protos.context.v1 import purpose_pb2
from nemo_protos.context.v1.error_reason_pb2 import ErrorReason

ACL = CallerAcl(
    {
        "gateway": {
            "BuildContext",
            "BuildConversationContext",
            "RecordTurn",
            "SearchKnowledge",
            "GetKnowledgeNode",
            "ListPurposes",
            "StoreGeneratedItems",
        },
        "toolplane": {
            "BuildContext",
            "CheckLearnerAccess",
            "CheckUser",
            "ListLinkedLearners",
            "ResolveLearnerRef",
            "SearchKnowledge",
            "GetKnowledgeNode",
            "ListPurposes",
        },
        "audit": {"GetSnapshot", "ListPurposes", "ListRetention"},
        # The platform signs people in and records their data rights requests for them.
        "platform": {"ListRetention", "SubmitRightsRequest", "GetRightsRequest"},
        "console": {
            "GetSnapshot",
            "ListPurposes",
            "ListRetention",
            "SubmitRightsRequest",
            "ListRightsRequests",
        },
    }
)

#: Callers that act for a person, whose access token each call carries: what they may read
#: and record is what that person may reach, whatever the caller itself may.
PERSON_CALLERS: Final = frozenset({"console"})

PURPOSE_KINDS_BY_CALLER: Final[Mapping[str, frozenset[purpose_pb2.PurposeKind.ValueType]]] = (
    MappingProxyType(
        {
            "gateway": frozenset({PROMPT, CONVERSATION}),
            "toolplane": frozenset({AGENT_VIEW}),
        }
    )
)


def check_purpose_caller(caller: str, purpose: Purpose) -> None:
    """PERMISSION_DENIED / ``PURPOSE_NOT_ALLOWED`` unless ``caller`` may build ``purpose``."""
    if purpose.kind not in PURPOSE_KINDS_BY_CALLER.get(caller, frozenset()):
        raise service_error(
            grpc.StatusCode.PERMISSION_DENIED,
            ErrorReason.PURPOSE_NOT_ALLOWED,
            "the caller may not build this kind of purpose",
            {"caller": caller, "purpose": purpose.name},
        )
