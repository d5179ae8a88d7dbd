"""What the policy engine decides about a call: the value audit rows and both edges carry."""

from __future__ import annotations

from enum import StrEnum


class Decision(StrEnum):
    ALLOW = "allow"
    DENY = "deny"
    REQUIRE_APPROVAL = "require_approval"
