"""The capacity model: replicas and cores per service for a load, from `make bench` figures.

Inputs are data: the plan (``deploy/capacity/plan.json``: the load, the pod sizes and the limits
of what the services share) and the benchmark's figures (``deploy/capacity/figures.json``, as
``make bench`` writes them: CPU milliseconds per call of each service and of PostgreSQL). The
load is a number of learners, of whom a share is active at the peak, each causing agent calls
and prompt runs at a rate; either total can also be given directly.

Per service, the CPU a second of peak load needs is its calls per second times its CPU per call.
Its pods are sized by the plan; the autoscaler keeps them at the target utilization, so the peak
needs ``cores / (cpu request * target)`` pods, and ``maxReplicas`` leaves the plan's headroom on
top. Then what the services share: PostgreSQL's CPU (bundle reads and limit decisions), its
connections (every pod's pool at ``maxReplicas``, and each tool plane's change listener), and
the provider's concurrency (prompt runs per second times their p95 latency, Little's law). The
resource with the highest use saturates first; the model says at how many learners each would.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Service = Literal["context", "gateway", "toolplane"]
SERVICES: tuple[Service, ...] = ("context", "gateway", "toolplane")

PLAN = Path("deploy/capacity/plan.json")
FIGURES = Path("deploy/capacity/figures.json")


class Pod(BaseModel):
    """One service's pod: what it requests and may use, and its PostgreSQL pool."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cpu_request_millicores: int = Field(gt=0)
    cpu_limit_millicores: int = Field(gt=0)
    memory_request_mebibytes: int = Field(gt=0)
    memory_limit_mebibytes: int = Field(gt=0)
    database_pool_size: int = Field(0, ge=0, description="0: the service has no database.")


class Plan(BaseModel):
    """The load to plan for and the limits of what the services share."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    learners: int = Field(gt=0)
    peak_active_share: float = Field(gt=0, le=1, description="Learners active at the peak.")
    agent_calls_per_active_learner_per_second: float = Field(ge=0)
    prompt_runs_per_active_learner_per_second: float = Field(ge=0)
    learner_reads_per_agent_call: float = Field(
        ge=0, le=1, description="Share of agent calls that read a learner (a bundle build)."
    )
    provider_p95_seconds: float = Field(gt=0, description="A prompt run's model time, p95.")
    provider_concurrency: int = Field(gt=0, description="Requests the provider account allows.")
    postgres_cores: float = Field(gt=0)
    postgres_max_connections: int = Field(gt=0)
    cpu_target_utilization: float = Field(gt=0, le=1, description="The autoscaler's target.")
    max_replicas_headroom: float = Field(ge=1, description="maxReplicas over the peak's need.")
    min_replicas: int = Field(ge=1, description="At least one pod per zone.")
    pods: dict[Service, Pod]


class Figures(BaseModel):
    """`make bench` figures the model needs (CPU milliseconds per call)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    context_build_service_cpu_ms: float = Field(alias="context.build.service_cpu_ms", gt=0)
    context_build_postgres_cpu_ms: float = Field(alias="context.build.postgres_cpu_ms", ge=0)
    gateway_prompt_service_cpu_ms: float = Field(alias="gateway.prompt.service_cpu_ms", gt=0)
    toolplane_docs_call_service_cpu_ms: float = Field(
        alias="toolplane.docs_call.service_cpu_ms", gt=0
    )
    toolplane_learner_call_service_cpu_ms: float = Field(
        alias="toolplane.learner_call.service_cpu_ms", gt=0
    )
    limiter_decision_postgres_cpu_ms: float = Field(alias="limiter.decision.postgres_cpu_ms", ge=0)


class Sizing(BaseModel):
    """One service at the plan's peak."""

    calls_per_second: float
    cores: float
    peak_replicas: int
    min_replicas: int
    max_replicas: int


class Shared(BaseModel):
    """A resource the services share: what the peak uses of it (at ``maxReplicas`` for
    connections) and the learners at which it would be used up."""

    name: str
    needed: float
    available: float

    @property
    def use(self) -> float:
        return self.needed / self.available


class Capacity(BaseModel):
    """The model's answer."""

    learners: int
    agent_calls_per_second: float
    prompt_runs_per_second: float
    services: dict[Service, Sizing]
    shared: list[Shared]
    provider_max_concurrency_per_pod: int

    @property
    def saturates_first(self) -> Shared:
        return max(self.shared, key=lambda resource: resource.use)


def load(plan_path: Path = PLAN, figures_path: Path = FIGURES) -> tuple[Plan, Figures]:
    plan = Plan.model_validate_json(plan_path.read_text(encoding="utf-8"))
    document = json.loads(figures_path.read_text(encoding="utf-8"))
    return plan, Figures.model_validate(document["figures"])


def compute(
    plan: Plan,
    figures: Figures,
    *,
    learners: int | None = None,
    agent_calls_per_second: float | None = None,
    prompt_runs_per_second: float | None = None,
) -> Capacity:
    """Size every service for ``learners`` (the plan's by default); explicit totals of agent
    calls and prompt runs per second replace those derived from the learners."""
    learners = learners or plan.learners
    active = learners * plan.peak_active_share
    agent = (
        agent_calls_per_second
        if agent_calls_per_second is not None
        else active * plan.agent_calls_per_active_learner_per_second
    )
    prompts = (
        prompt_runs_per_second
        if prompt_runs_per_second is not None
        else active * plan.prompt_runs_per_active_learner_per_second
    )
    reads = plan.learner_reads_per_agent_call
    builds = prompts + agent * reads
    toolplane_cpu_ms = (
        reads * figures.toolplane_learner_call_service_cpu_ms
        + (1 - reads) * figures.toolplane_docs_call_service_cpu_ms
    )
    rates: dict[Service, tuple[float, float]] = {
        "context": (builds, figures.context_build_service_cpu_ms),
        "gateway": (prompts, figures.gateway_prompt_service_cpu_ms),
        "toolplane": (agent, toolplane_cpu_ms),
    }
    services = {
        service: _size(plan, plan.pods[service], calls, cpu_ms)
        for service, (calls, cpu_ms) in rates.items()
    }
    postgres_cores = (
        builds * figures.context_build_postgres_cpu_ms
        + agent * figures.limiter_decision_postgres_cpu_ms
    ) / 1000
    connections = (
        sum(
            services[service].max_replicas * plan.pods[service].database_pool_size
            for service in SERVICES
        )
        + services["toolplane"].max_replicas
    )  # each tool plane's change listener
    gateway_max = services["gateway"].max_replicas
    return Capacity(
        learners=learners,
        agent_calls_per_second=agent,
        prompt_runs_per_second=prompts,
        services=services,
        shared=[
            Shared(
                name="PostgreSQL CPU (cores)", needed=postgres_cores, available=plan.postgres_cores
            ),
            Shared(
                name="PostgreSQL connections at maxReplicas",
                needed=connections,
                available=plan.postgres_max_connections,
            ),
            Shared(
                name="provider concurrency (requests in flight)",
                needed=prompts * plan.provider_p95_seconds,
                available=plan.provider_concurrency,
            ),
        ],
        provider_max_concurrency_per_pod=max(1, plan.provider_concurrency // gateway_max),
    )


def _size(plan: Plan, pod: Pod, calls_per_second: float, cpu_ms: float) -> Sizing:
    cores = calls_per_second * cpu_ms / 1000
    per_pod = pod.cpu_request_millicores / 1000 * plan.cpu_target_utilization
    peak = max(1, math.ceil(cores / per_pod))
    minimum = plan.min_replicas
    return Sizing(
        calls_per_second=calls_per_second,
        cores=cores,
        peak_replicas=peak,
        min_replicas=minimum,
        max_replicas=max(minimum + 1, math.ceil(peak * plan.max_replicas_headroom)),
    )


def describe(capacity: Capacity) -> str:
    """The model's answer as a table an operator reads."""
    lines = [
        f"{capacity.learners:,} learners: {capacity.agent_calls_per_second:,.0f} agent calls/s, "
        f"{capacity.prompt_runs_per_second:,.0f} prompt runs/s at the peak",
        "",
        f"{'service':<10} {'calls/s':>9} {'cores':>7} {'pods at peak':>13} {'min':>4} {'max':>4}",
    ]
    for service, sizing in capacity.services.items():
        lines.append(
            f"{service:<10} {sizing.calls_per_second:>9,.0f} {sizing.cores:>7.2f} "
            f"{sizing.peak_replicas:>13} {sizing.min_replicas:>4} {sizing.max_replicas:>4}"
        )
    lines += [
        "",
        f"{'shared resource':<44} {'needed':>9} {'available':>10} {'use':>6} "
        f"{'saturates at (learners)':>24}",
    ]
    for resource in capacity.shared:
        at = capacity.learners / resource.use if resource.use else math.inf
        lines.append(
            f"{resource.name:<44} {resource.needed:>9,.1f} {resource.available:>10,.0f} "
            f"{resource.use:>6.0%} {at:>24,.0f}"
        )
    first = capacity.saturates_first
    lines += [
        "",
        f"saturates first: {first.name} ({first.use:.0%} at the peak)",
        f"gateway provider concurrency per pod: {capacity.provider_max_concurrency_per_pod} "
        f"(provider concurrency / gateway maxReplicas)",
    ]
    return "\n".join(lines)
