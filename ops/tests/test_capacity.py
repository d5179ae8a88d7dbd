"""The capacity model: enough pods for the peak at the target utilization, never fewer for more
load, a pooler whose pools hold the peak's busy server connections on its fewest pods and whose
pods take every service pod's connections, the shared resource that saturates first and the
learners at which each would, and the command that prints and writes it."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemo_ops.capacity import (
    FIGURES,
    PLAN,
    SERVICES,
    Figures,
    Plan,
    compute,
    load,
    saturation_learners,
)
from nemo_ops.cli import main

REPOSITORY = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def committed() -> tuple[Plan, Figures]:
    return load(REPOSITORY / PLAN, REPOSITORY / FIGURES)


_LEARNERS = st.integers(1, 5_000_000)


@given(learners=_LEARNERS)
def test_every_service_gets_enough_pods_for_its_peak(learners: int) -> None:
    plan, figures = load(REPOSITORY / PLAN, REPOSITORY / FIGURES)
    capacity = compute(plan, figures, learners=learners)
    for service in SERVICES:
        sizing = capacity.services[service]
        per_pod = plan.pods[service].cpu_request_millicores / 1000 * plan.cpu_target_utilization
        # The peak's pods hold its cores at the target, and one pod fewer would not.
        assert sizing.peak_replicas * per_pod >= sizing.cores
        assert sizing.peak_replicas == 1 or (sizing.peak_replicas - 1) * per_pod < sizing.cores
        assert sizing.min_replicas == plan.min_replicas
        assert sizing.max_replicas > sizing.min_replicas
        assert sizing.max_replicas >= sizing.peak_replicas * plan.max_replicas_headroom


@given(fewer=_LEARNERS, more=_LEARNERS)
def test_more_learners_never_need_less(fewer: int, more: int) -> None:
    plan, figures = load(REPOSITORY / PLAN, REPOSITORY / FIGURES)
    fewer, more = sorted((fewer, more))
    small, large = compute(plan, figures, learners=fewer), compute(plan, figures, learners=more)
    for service in SERVICES:
        assert small.services[service].cores <= large.services[service].cores
        assert small.services[service].max_replicas <= large.services[service].max_replicas
    for before, after in zip(small.shared, large.shared, strict=True):
        assert before.needed <= after.needed


@given(
    agent=st.floats(0, 1e5, allow_nan=False),
    prompts=st.floats(0, 1e5, allow_nan=False),
)
def test_explicit_rates_replace_those_of_the_learners(agent: float, prompts: float) -> None:
    plan, figures = load(REPOSITORY / PLAN, REPOSITORY / FIGURES)
    capacity = compute(plan, figures, agent_calls_per_second=agent, prompt_runs_per_second=prompts)
    assert capacity.services["gateway"].calls_per_second == prompts
    assert capacity.services["toolplane"].calls_per_second == agent
    assert math.isclose(
        capacity.services["context"].calls_per_second,
        prompts + agent * plan.learner_reads_per_agent_call,
    )
    provider = capacity.shared[2]
    assert math.isclose(provider.needed, prompts * plan.provider_p95_seconds)
    assert capacity.saturates_first.use == max(resource.use for resource in capacity.shared)


def test_the_provider_limit_per_pod_keeps_the_sum_within_the_account(
    committed: tuple[Plan, Figures],
) -> None:
    plan, figures = committed
    capacity = compute(plan, figures)
    per_pod = capacity.provider_max_concurrency_per_pod
    gateways = capacity.services["gateway"].max_replicas
    assert per_pod * gateways <= plan.provider_concurrency < (per_pod + 1) * gateways


def test_the_command_prints_the_model_for_a_load(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPOSITORY)
    assert main(["capacity", "--learners", "250000"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("250,000 learners:")
    assert "saturates first: " in out
    for service in SERVICES:
        assert f"\n{service} " in out


@given(learners=_LEARNERS)
def test_the_pooler_holds_the_peak_on_its_fewest_pods_and_takes_every_client(
    learners: int,
) -> None:
    plan, figures = load(REPOSITORY / PLAN, REPOSITORY / FIGURES)
    capacity = compute(plan, figures, learners=learners)
    pooler = capacity.pooler
    headroom = plan.pooler.server_connection_headroom
    for role, busy in pooler.busy_server_connections.items():
        # Any min_replicas pods alone hold the busy connections of each role, with headroom.
        assert pooler.default_pool_size * plan.pooler.min_replicas >= busy * headroom, role
    # Both roles share the database's limit of each pod.
    assert pooler.max_db_connections == 2 * pooler.default_pool_size
    clients = sum(
        capacity.services[service].max_replicas * plan.pods[service].database_pool_size
        for service in SERVICES
    )
    assert pooler.client_connections == clients
    assert pooler.replicas >= plan.pooler.min_replicas
    assert pooler.replicas * pooler.max_client_conn >= clients
    # One pod fewer would not take them (or the minimum decided).
    assert (
        pooler.replicas == plan.pooler.min_replicas
        or (pooler.replicas - 1) * pooler.max_client_conn < clients
    )
    [connections] = [r for r in capacity.shared if r.name.startswith("PostgreSQL connections")]
    listeners = capacity.services["toolplane"].max_replicas
    assert connections.needed == (
        pooler.replicas * pooler.max_db_connections + listeners + plan.pooler.reserved_connections
    )
    # Without the pooler every client connection would reach PostgreSQL.
    assert capacity.direct_connections == clients + listeners


def test_each_resource_saturates_at_the_fewest_learners_that_use_it_up(
    committed: tuple[Plan, Figures],
) -> None:
    plan, figures = committed
    for resource in compute(plan, figures).shared:
        at = saturation_learners(plan, figures, resource.name)
        if math.isinf(at):
            continue

        def use(learners: int, name: str = resource.name) -> float:
            shared = compute(plan, figures, learners=learners).shared
            return next(r for r in shared if r.name == name).use

        assert use(int(at)) >= 1, resource.name
        assert use(int(at) - 1) < 1, resource.name


def test_the_plan_fits_two_million_learners_and_names_what_saturates_next(
    committed: tuple[Plan, Figures],
) -> None:
    plan, figures = committed
    capacity = compute(plan, figures)
    assert capacity.learners >= 2_000_000
    assert all(resource.use < 1 for resource in capacity.shared)
    # The pooler is what makes the connections fit: straight to PostgreSQL they would not.
    assert capacity.direct_connections > plan.postgres_max_connections
    first = capacity.saturates_first
    assert saturation_learners(plan, figures, first.name) > capacity.learners
