"""Which caller may use which RPC of the gateway: internal services run prompts; the console
shows the prompts and the kill switch's state to operators."""

from __future__ import annotations

from nemo_core.callers import CallerAcl

ACL = CallerAcl(
    {
        "internal": {"RunPrompt", "StreamPrompt", "Answer", "ListPrompts"},
        "console": {"ListPrompts"},
    }
)
