"""Every journey runs twice: against the services connected straight to PostgreSQL, and against
the same services through PgBouncer in transaction mode, as production runs them."""

from __future__ import annotations

import pytest

from tests.stack import Stack


@pytest.fixture(scope="session", params=["direct", "pooled"])
def stack(request: pytest.FixtureRequest, stack: Stack) -> Stack:
    """The session's direct stack, or its pooled one."""
    if request.param == "direct":
        return stack
    pooled: Stack = request.getfixturevalue("pooled_stack")
    return pooled
