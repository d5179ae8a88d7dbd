"""Which caller may use which RPC of the tool plane, and which may vouch for a user.

Internal agents call tools (and authenticate as an agent on top, with an agent token); operators
manage tokens, approvals and read the audit log.
"""

from __future__ import annotations

from typing import Final

from nemo_core.callers import CallerAcl

ACL = CallerAcl(
    {
        "internal": {"ListTools", "CallTool"},
        "platform": {"ListTools", "CallTool"},
        "operator": {
            "IssueAgentToken",
            "RevokeAgentToken",
            "ListApprovals",
            "DecideApproval",
            "ListAuditEntries",
        },
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
