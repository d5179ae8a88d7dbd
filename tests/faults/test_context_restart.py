"""The context service killed and started again under load: while it is down the gateway answers
UNAVAILABLE and the tool plane a retryable DEPENDENCY_ERROR envelope; both recover by
themselves once it is back, without a restart of their own."""

from __future__ import annotations

import time

from tests.stack import Stack, StackFactory

from .support import OK, UNLIMITED_TOOLPLANE, Load, only, stack_clients

GATEWAY_DOWN = "UNAVAILABLE/CONTEXT_UNAVAILABLE"
TOOLPLANE_DOWN = "envelope/ERROR_CODE_DEPENDENCY_ERROR"


async def test_gateway_and_tool_plane_degrade_and_recover_when_context_restarts(
    start_stack: StackFactory,
) -> None:
    stack: Stack = await start_stack(extra_env={"toolplane": UNLIMITED_TOOLPLANE})
    async with stack_clients(stack) as clients:
        hints, states = Load(), Load()
        hints.start(clients.hint, callers=2)
        states.start(clients.learning_state, callers=2)
        try:
            started = time.monotonic()
            await hints.wait_for(OK, since=started)
            await states.wait_for(OK, since=started)

            assert await stack.context.kill() == -9
            down = time.monotonic()
            await hints.wait_for(GATEWAY_DOWN, since=down)
            await states.wait_for(TOOLPLANE_DOWN, since=down)
            # Nothing but the dependency failure while it is down (calls already past the
            # context service may still finish).
            assert only(hints.kinds(since=down), {OK, GATEWAY_DOWN}) == {}
            assert only(states.kinds(since=down), {OK, TOOLPLANE_DOWN}) == {}

            await stack.context.start()
            back = time.monotonic()
            await hints.wait_for(OK, since=back)
            await states.wait_for(OK, since=back)
        finally:
            await hints.stop()
            await states.stop()

    # The gateway and the tool plane kept running through it all.
    assert stack.gateway.running
    assert stack.toolplane.running
    assert only(hints.kinds(), {OK, GATEWAY_DOWN}) == {}
    assert only(states.kinds(), {OK, TOOLPLANE_DOWN}) == {}
    assert hints.outcomes[-1].kind == OK
    assert states.outcomes[-1].kind == OK
