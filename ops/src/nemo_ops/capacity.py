"""The capacity model: replicas and cores per service for a load, from `make bench` figures.

Inputs are data: the plan (``deploy/capacity/plan.json``: the load, the pod sizes and the limits
of what the services share) and the benchmark's figures (``deploy/capacity/figures.json``, as
``make bench`` writes them: CPU milliseconds per call of each service and of PostgreSQL). The
load is a number of learners, of whom a share is active at the peak, each causing agent calls
and prompt runs at a rate; either total can also be given directly.

Per service, the CPU a second of peak load needs is its calls per second times its CPU per call.
Its pods are sized by the plan; the autoscaler keeps them at the target utilization, so the peak
needs ``cores / (cpu request * target)`` pods, and ``maxReplicas`` leaves the plan's headroom on
top. The services reach PostgreSQL through PgBouncer in transaction mode: a transaction holds
one of its server connections for its PostgreSQL time plus its round trips (Little's law gives
the connections busy at the peak), so its pools are sized from that with headroom, any
``min_replicas`` pooler pods holding the whole peak, and enough pods for every service pod's
client connections at ``maxReplicas``. Then what the services share: PostgreSQL's CPU (bundle
reads and limit decisions), its connections (the poolers' server connections, each tool plane's
change listener, and a reserve for migrations and operators), the poolers' client connections,
and the provider's concurrency (prompt runs per second times their p95 latency). The resource
with the highest use saturates first; the model says at how many learners each would, sizing
everything again for that many.
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


class Pooler(BaseModel):
    """PgBouncer in front of PostgreSQL (transaction mode): how its pools are sized."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_replicas: int = Field(ge=1, description="Pooler pods that alone hold the whole peak.")
    max_client_conn: int = Field(gt=0, description="Client connections one pod accepts.")
    server_connection_headroom: float = Field(
        ge=1, description="Server connections per role over those busy at the peak."
    )
    reserved_connections: int = Field(
        ge=0, description="PostgreSQL connections kept for migrations, operators and admins."
    )
    round_trip_ms: float = Field(
        ge=0, description="One statement's round trip, service to pooler to PostgreSQL."
    )
    round_trips_per_build: int = Field(
        ge=1, description="Round trips of a bundle build's transactions (binding, read, digest)."
    )
    round_trips_per_agent_call: int = Field(
        ge=1, description="Round trips an agent call holds a server connection for (limits)."
    )
    pod: Pod


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
    pooler: Pooler


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


class PoolerSizing(BaseModel):
    """The pooler at the plan's peak: its pods and pools, and what uses them."""

    replicas: int
    default_pool_size: int = Field(description="Server connections per role and pod.")
    max_db_connections: int = Field(description="Server connections per pod (both roles).")
    max_client_conn: int
    busy_server_connections: dict[str, float] = Field(description="By role, at the peak.")
    client_connections: int = Field(description="Every service pod's pool at maxReplicas.")

    @property
    def server_connections(self) -> int:
        """What every pooler pod may open to PostgreSQL together."""
        return self.replicas * self.max_db_connections


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
    pooler: PoolerSizing
    shared: list[Shared]
    provider_max_concurrency_per_pod: int

    @property
    def direct_connections(self) -> int:
        """PostgreSQL connections at maxReplicas if every service pod's pool went straight to
        it, with the change listeners."""
        return self.pooler.client_connections + self.services["toolplane"].max_replicas

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
    pooler = _size_pooler(plan, figures, services, builds=builds, agent_calls=agent)
    connections = (
        pooler.server_connections
        + services["toolplane"].max_replicas  # each tool plane's change listener
        + plan.pooler.reserved_connections
    )
    gateway_max = services["gateway"].max_replicas
    return Capacity(
        learners=learners,
        agent_calls_per_second=agent,
        prompt_runs_per_second=prompts,
        services=services,
        pooler=pooler,
        shared=[
            Shared(
                name="PostgreSQL CPU (cores)", needed=postgres_cores, available=plan.postgres_cores
            ),
            Shared(
                name="PostgreSQL connections (poolers, listeners)",
                needed=connections,
                available=plan.postgres_max_connections,
            ),
            Shared(
                name="provider concurrency (requests in flight)",
                needed=prompts * plan.provider_p95_seconds,
                available=plan.provider_concurrency,
            ),
            Shared(
                name="pooler client connections at maxReplicas",
                needed=pooler.client_connections,
                available=pooler.replicas * pooler.max_client_conn,
            ),
        ],
        provider_max_concurrency_per_pod=max(1, plan.provider_concurrency // gateway_max),
    )


def _size_pooler(
    plan: Plan,
    figures: Figures,
    services: dict[Service, Sizing],
    *,
    builds: float,
    agent_calls: float,
) -> PoolerSizing:
    """Pools from the server connections busy at the peak (Little's law), held by any
    ``min_replicas`` pods alone; pods for every service pod's connections at maxReplicas."""
    pooler = plan.pooler
    busy = {
        "nemo_context": builds
        * (
            figures.context_build_postgres_cpu_ms
            + pooler.round_trips_per_build * pooler.round_trip_ms
        )
        / 1000,
        "nemo_toolplane": agent_calls
        * (
            figures.limiter_decision_postgres_cpu_ms
            + pooler.round_trips_per_agent_call * pooler.round_trip_ms
        )
        / 1000,
    }
    needed = max(busy.values()) * pooler.server_connection_headroom
    default_pool_size = max(1, math.ceil(needed / pooler.min_replicas))
    clients = sum(
        services[service].max_replicas * plan.pods[service].database_pool_size
        for service in SERVICES
    )
    replicas = max(pooler.min_replicas, math.ceil(clients / pooler.max_client_conn))
    return PoolerSizing(
        replicas=replicas,
        default_pool_size=default_pool_size,
        max_db_connections=default_pool_size * len(busy),
        max_client_conn=pooler.max_client_conn,
        busy_server_connections=busy,
        client_connections=clients,
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


#: Beyond this many learners the model stops looking for a resource's limit.
_SEARCH_LIMIT = 10**10


def saturation_learners(plan: Plan, figures: Figures, resource: str) -> float:
    """The fewest learners at which ``resource`` is used up, everything sized for them
    (``math.inf`` when it never is: the pooler's pods, say, grow with their clients)."""

    def use(learners: int) -> float:
        shared = compute(plan, figures, learners=learners).shared
        return next(item for item in shared if item.name == resource).use

    if use(_SEARCH_LIMIT) < 1:
        return math.inf
    low, high = 0, _SEARCH_LIMIT  # use(low) < 1 <= use(high)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if use(middle) >= 1 else (middle, high)
    return high


def describe(capacity: Capacity, plan: Plan, figures: Figures) -> str:
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
        at = saturation_learners(plan, figures, resource.name)
        lines.append(
            f"{resource.name:<44} {resource.needed:>9,.1f} {resource.available:>10,.0f} "
            f"{resource.use:>6.0%} {'never' if math.isinf(at) else f'{at:,.0f}':>24}"
        )
    pooler = capacity.pooler
    busy = ", ".join(f"{role} {n:,.1f}" for role, n in pooler.busy_server_connections.items())
    first = capacity.saturates_first
    lines += [
        "",
        f"pooler (PgBouncer, transaction mode): {pooler.replicas} pods, default_pool_size "
        f"{pooler.default_pool_size}, max_db_connections {pooler.max_db_connections}, "
        f"max_client_conn {pooler.max_client_conn}",
        f"  server connections busy at the peak: {busy} "
        f"(of {pooler.default_pool_size * plan.pooler.min_replicas:,} per role on "
        f"{plan.pooler.min_replicas} pods)",
        f"  without it, PostgreSQL would take {capacity.direct_connections:,} connections at "
        f"maxReplicas ({capacity.direct_connections / plan.postgres_max_connections:.0%})",
        "",
        f"saturates first: {first.name} ({first.use:.0%} at the peak)",
        f"gateway provider concurrency per pod: {capacity.provider_max_concurrency_per_pod} "
        f"(provider concurrency / gateway maxReplicas)",
    ]
    return "\n".join(lines)
