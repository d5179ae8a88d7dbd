"""The prod overlay and the capacity model agree: its scaling patch and the pooler's pool.ini
are the ones `nemo capacity --write` produces from the committed plan and figures, and the
rendered manifests carry the model's replica bounds, CPU target, requests, limits, pool sizes,
provider concurrency and the pooler's pods and pools."""

from __future__ import annotations

import pytest

from nemo_ops.capacity import FIGURES, PLAN, SERVICES, Service, compute, load
from nemo_ops.capacity_manifests import (
    POOL,
    POOLER_DEPLOYMENT,
    SCALING,
    container_resources,
    pool_ini,
    render,
)
from tests.deploy.deploy_manifests import (
    RENDERERS,
    REPO,
    by_kind,
    container_environment,
    pod_spec,
    rendered,
    the,
)

PLAN_AND_FIGURES = load(REPO / PLAN, REPO / FIGURES)


def test_the_scaling_patch_is_the_models() -> None:
    plan, figures = PLAN_AND_FIGURES
    assert (REPO / SCALING).read_text(encoding="utf-8") == render(plan, compute(plan, figures)), (
        "deploy/k8s/overlays/prod/scaling.yaml is stale: run `nemo capacity --write`"
    )


def test_the_pool_file_is_the_models() -> None:
    plan, figures = PLAN_AND_FIGURES
    assert (REPO / POOL).read_text(encoding="utf-8") == pool_ini(compute(plan, figures)), (
        "deploy/k8s/overlays/prod/pgbouncer-pool.ini is stale: run `nemo capacity --write`"
    )


@pytest.mark.parametrize("renderer", RENDERERS)
def test_the_rendered_pooler_is_sized_by_the_model(renderer: str) -> None:
    plan, figures = PLAN_AND_FIGURES
    pooler = compute(plan, figures).pooler
    resources = rendered(renderer, "prod")
    deployment = the(resources, "Deployment", POOLER_DEPLOYMENT)
    assert deployment["spec"]["replicas"] == pooler.replicas
    [container] = pod_spec(deployment)["containers"]
    assert container["resources"] == container_resources(plan.pooler.pod)
    # The pool sizes reach the pod: the ConfigMap its projected volume mounts holds them.
    [volume] = [v for v in pod_spec(deployment)["volumes"] if "projected" in v]
    mounted = {
        key: text
        for source in volume["projected"]["sources"]
        for key, text in by_kind(resources, "ConfigMap")[source["configMap"]["name"]][
            "data"
        ].items()
    }
    assert mounted["pool.ini"] == pool_ini(compute(plan, figures))
    assert "%include /etc/pgbouncer/pool.ini" in mounted["pgbouncer.ini"]


@pytest.mark.parametrize("renderer", RENDERERS)
@pytest.mark.parametrize("service", SERVICES)
def test_the_rendered_prod_overlay_is_sized_by_the_model(renderer: str, service: Service) -> None:
    plan, figures = PLAN_AND_FIGURES
    capacity = compute(plan, figures)
    resources = rendered(renderer, "prod")
    autoscaler = by_kind(resources, "HorizontalPodAutoscaler")[f"nemo-{service}"]["spec"]
    sizing = capacity.services[service]
    assert (autoscaler["minReplicas"], autoscaler["maxReplicas"]) == (
        sizing.min_replicas,
        sizing.max_replicas,
    )
    [metric] = autoscaler["metrics"]
    target = metric["resource"]["target"]["averageUtilization"]
    assert target == round(plan.cpu_target_utilization * 100)

    spec = pod_spec(the(resources, "Deployment", f"nemo-{service}"))
    container = next(c for c in spec["containers"] if c["name"] == service)
    pod = plan.pods[service]
    assert container["resources"] == container_resources(pod)
    environment = container_environment(resources, container)
    prefix = f"NEMO_{service.upper()}_"
    if pod.database_pool_size:
        assert environment[f"{prefix}DATABASE_POOL_SIZE"] == str(pod.database_pool_size)
    if service == "gateway":
        assert environment["NEMO_GATEWAY_PROVIDER_MAX_CONCURRENCY"] == str(
            capacity.provider_max_concurrency_per_pod
        )
