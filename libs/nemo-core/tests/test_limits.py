"""Fail-fast limits: never more holders than the limit, refused at once, every place given back."""

from __future__ import annotations

from contextlib import ExitStack

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemo_core.errors import ServiceError
from nemo_core.limits import InFlightLimit, KeyedInFlightLimit


def _busy(key: str = "") -> ServiceError:
    return ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED, "BUSY", f"busy {key}".strip())


class _Failure(Exception):
    pass


# A run of steps: True enters one more holder, False lets the oldest holder leave.
steps = st.lists(st.booleans(), max_size=40)


@given(st.integers(min_value=0, max_value=5), steps)
def test_holders_never_exceed_the_limit_and_refusals_come_only_when_full(
    limit: int, run: list[bool]
) -> None:
    slots = InFlightLimit(limit, _busy)
    with ExitStack() as outer:
        held: list[ExitStack] = []
        for enter in run:
            if enter and len(held) == limit:
                with pytest.raises(ServiceError) as refused, slots.hold():
                    pass
                assert refused.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
            elif enter:
                stack = ExitStack()
                stack.enter_context(slots.hold())
                held.append(stack)
                outer.callback(stack.close)
            elif held:
                held.pop(0).close()
    with ExitStack() as again:  # everything left: all the places are free again
        for _ in range(limit):
            again.enter_context(slots.hold())


def test_a_failing_holder_gives_its_place_back() -> None:
    slots = InFlightLimit(1, _busy)
    with pytest.raises(_Failure), slots.hold():
        raise _Failure
    with slots.hold(), pytest.raises(ServiceError), slots.hold():
        pass


@given(st.integers(min_value=1, max_value=3), st.lists(st.sampled_from("abc"), max_size=30))
def test_each_key_has_its_own_places(limit: int, keys: list[str]) -> None:
    limits = KeyedInFlightLimit(limit, _busy)
    held: dict[str, int] = {}
    with ExitStack() as stack:
        for key in keys:
            if held.get(key, 0) == limit:
                with pytest.raises(ServiceError) as refused, limits.hold(key):
                    pass
                assert refused.value.message == f"busy {key}"
                continue
            stack.enter_context(limits.hold(key))
            held[key] = held.get(key, 0) + 1
    for key in "abc":  # all given back
        with ExitStack() as stack:
            for _ in range(limit):
                stack.enter_context(limits.hold(key))


def test_a_key_without_holders_takes_no_memory() -> None:
    limits = KeyedInFlightLimit(2, _busy)
    with limits.hold("a"), limits.hold("a"):
        pass
    with pytest.raises(_Failure), limits.hold("b"):
        raise _Failure
    assert limits._in_flight == {}
