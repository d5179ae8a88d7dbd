"""Which caller may use which RPC of the gateway: internal services run prompts."""

from __future__ import annotations

from nemo_core.callers import CallerAcl

ACL = CallerAcl(
    {
        "internal": {"RunPrompt", "StreamPrompt", "Answer", "ListPrompts"},
    }
)
