"""Which caller may use which RPC of the tool plane.

Internal agents call tools (and authenticate as an agent on top, with an agent token); operators
manage tokens, approvals and read the audit log.
"""

from __future__ import annotations

from nemo_core.callers import CallerAcl

ACL = CallerAcl(
    {
        "internal": {"ListTools", "CallTool"},
        "operator": {
            "IssueAgentToken",
            "RevokeAgentToken",
            "ListApprovals",
            "DecideApproval",
            "ListAuditEntries",
        },
    }
)
