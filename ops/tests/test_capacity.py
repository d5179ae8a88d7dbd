"""The capacity model: enough pods for the peak at the target utilization, never fewer for more
load, the shared resource that saturates first, and the command that prints and writes it."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemo_ops.capacity import FIGURES, PLAN, SERVICES, Figures, Plan, compute, load
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
