"""Which caller may use which RPC of the tool plane, and which may vouch for a user.

Internal agents call tools (and authenticate as an agent on top, with an agent token). The
people's API is for the operators' tools (the ``nemo`` command, grpcurl) and the console; each
of its calls also carries the credential of the person it acts for (:mod:`.people`).
"""

from __future__ import annotations

from typing import Final

from nemo_core.callers import CallerAcl

#: The people's API (``ToolPlaneAdminService``): every method acts for a person.
PEOPLE_API: Final = frozenset(
    {
        "IssueAgentToken",
        "RevokeAgentToken",
        "ListApprovals",
        "DecideApproval",
        "ListAuditEntries",
        "GetPerson",
        "ListAgents",
        "CreateGrant",
        "DeleteGrant",
        "ListPolicies",
        "ListLinkedLearners",
        "ListLearnerActivity",
        "ListLearnerApprovals",
        "ListAuthorizations",
        "RevokeAuthorization",
    }
)

ACL = CallerAcl(
    {
        "internal": {"ListTools", "CallTool"},
        "platform": {"ListTools", "CallTool"},
        "operator": PEOPLE_API,
        "console": PEOPLE_API,
    }
)

#: Callers whose ``CallToolRequest.user_id`` counts as the user the agent acts for, as a token
#: bound to that user would. Only ``platform``: the platform's backend signs its users in itself,
#: so when it runs an internal agent for the person signed in, it knows who that person is. The
#: ``internal`` identity is shared by scripts, batch jobs and research tools that sign nobody in;
#: trusting the user ids they send would let any holder of that token act as any user (a staff
#: member's id reads every learner), so theirs are only asserted: recorded, never a basis for
#: access. No MCP client vouches for anyone.
USER_VOUCHING_CALLERS: Final = frozenset({"platform"})
