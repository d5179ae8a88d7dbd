"""Which caller may use which RPC of the context service.

The gateway builds prompt and conversation context and records turns; the tool plane reads agent
views, checks learner access and searches knowledge; only the audit caller reads snapshots.
Which purposes each caller may build is decided per request, in the purpose table.
"""

from __future__ import annotations

from nemo_core.callers import CallerAcl

ACL = CallerAcl(
    {
        "gateway": {
            "BuildContext",
            "BuildConversationContext",
            "RecordTurn",
            "SearchKnowledge",
            "GetKnowledgeNode",
            "ListPurposes",
        },
        "toolplane": {
            "BuildContext",
            "CheckLearnerAccess",
            "SearchKnowledge",
            "GetKnowledgeNode",
            "ListPurposes",
        },
        "audit": {"GetSnapshot", "ListPurposes"},
    }
)
