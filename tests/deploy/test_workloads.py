"""Policy over the rendered workloads: locked-down containers, gRPC health probes, graceful
termination, scaling and disruption budgets, and Services that reach their pods."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf.descriptor import FileDescriptor

from nemo_protos.context.v1 import context_service_pb2
from nemo_protos.gateway.v1 import gateway_service_pb2
from nemo_protos.toolplane.v1 import toolplane_admin_service_pb2, toolplane_service_pb2
from tests.deploy.deploy_kustomize import ImageReference, containers_of
from tests.deploy.deploy_manifests import (
    OVERLAYS,
    RENDERERS,
    SERVICES,
    all_containers,
    by_kind,
    container_environment,
    pod_labels,
    pod_spec,
    rendered,
    the,
    workloads,
)
from tests.deploy.deploy_netpol import selector_matches

#: The gRPC services each Deployment serves (and reports in grpc.health.v1).
SERVED: dict[str, tuple[FileDescriptor, ...]] = {
    "nemo-context": (context_service_pb2.DESCRIPTOR,),
    "nemo-gateway": (gateway_service_pb2.DESCRIPTOR,),
    "nemo-toolplane": (toolplane_service_pb2.DESCRIPTOR, toolplane_admin_service_pb2.DESCRIPTOR),
}

RUNNING_KUSTOMIZATIONS = (*sorted(OVERLAYS), "observability")
overlays = pytest.mark.parametrize("overlay", sorted(OVERLAYS))
renderers = pytest.mark.parametrize("renderer", RENDERERS)


def _lockdown_violations(pod: dict[str, Any], container: dict[str, Any]) -> list[str]:
    pod_context = pod.get("securityContext", {})
    context = container.get("securityContext", {})

    def effective(field: str) -> Any:
        return context.get(field, pod_context.get(field))

    checks = {
        "runAsNonRoot": effective("runAsNonRoot") is True and context.get("runAsNonRoot") is True,
        "numeric non-root user": isinstance(effective("runAsUser"), int)
        and effective("runAsUser") > 0,
        "readOnlyRootFilesystem": context.get("readOnlyRootFilesystem") is True,
        "allowPrivilegeEscalation false": context.get("allowPrivilegeEscalation") is False,
        "drop ALL capabilities": context.get("capabilities", {}).get("drop") == ["ALL"]
        and not context.get("capabilities", {}).get("add"),
        "not privileged": not context.get("privileged", False),
        "seccomp RuntimeDefault": (effective("seccompProfile") or {}).get("type")
        == "RuntimeDefault",
        "no service-account token": pod.get("automountServiceAccountToken") is False,
        "no host namespaces": not any(
            pod.get(field) for field in ("hostNetwork", "hostPID", "hostIPC")
        ),
    }
    resources = container.get("resources", {})
    for bound in ("requests", "limits"):
        for resource in ("cpu", "memory"):
            checks[f"{bound}.{resource}"] = resource in resources.get(bound, {})
    return [name for name, ok in checks.items() if not ok]


@renderers
@pytest.mark.parametrize("kustomization", RUNNING_KUSTOMIZATIONS)
def test_every_container_is_locked_down(renderer: str, kustomization: str) -> None:
    resources = rendered(renderer, kustomization)
    violations = {
        f"{name}/{container['name']}": problems
        for name, pod, container in all_containers(resources)
        if (problems := _lockdown_violations(pod, container))
    }
    assert list(all_containers(resources))
    assert violations == {}


@renderers
@pytest.mark.parametrize("kustomization", RUNNING_KUSTOMIZATIONS)
def test_every_pod_runs_as_its_own_tokenless_service_account(
    renderer: str, kustomization: str
) -> None:
    resources = rendered(renderer, kustomization)
    accounts = by_kind(resources, "ServiceAccount")
    assert all(a.get("automountServiceAccountToken") is False for a in accounts.values())
    used = [pod_spec(w).get("serviceAccountName") for w in workloads(resources).values()]
    assert all(name in accounts for name in used), used
    assert len(set(used)) == len(used), "workloads share a service account"


@renderers
@overlays
def test_services_have_grpc_health_probes_and_a_startup_probe(renderer: str, overlay: str) -> None:
    resources = rendered(renderer, overlay)
    for name, (container_name, _, port) in SERVICES.items():
        spec = pod_spec(the(resources, "Deployment", name))
        container = next(c for c in spec["containers"] if c["name"] == container_name)
        declared = {p["containerPort"] for p in container["ports"]}
        served = {
            service.full_name for file in SERVED[name] for service in file.services_by_name.values()
        }
        readiness, liveness = container["readinessProbe"], container["livenessProbe"]
        assert readiness["grpc"]["port"] == port, name
        assert port in declared, name
        assert readiness["grpc"]["service"] in served, name
        # Liveness asks for the whole server ("" service): it is up, whatever it serves.
        assert liveness["grpc"]["port"] == port, name
        assert liveness["grpc"].get("service", "") == "", name
        startup = container["startupProbe"]
        startup_port = startup.get("grpc", {}).get("port") or startup["httpGet"]["port"]
        names = {p.get("name") for p in container["ports"]}
        assert startup_port in declared | names, name
        assert startup["periodSeconds"] * startup["failureThreshold"] >= 30, name


@renderers
@overlays
def test_pods_outlive_the_servers_drain_and_grace(renderer: str, overlay: str) -> None:
    resources = rendered(renderer, overlay)
    for name, (container_name, prefix, _) in SERVICES.items():
        spec = pod_spec(the(resources, "Deployment", name))
        container = next(c for c in spec["containers"] if c["name"] == container_name)
        environment = container_environment(resources, container)
        drain = float(environment[f"{prefix}DRAIN_SECONDS"])
        grace = float(environment[f"{prefix}GRACE_PERIOD_SECONDS"])
        # Endpoints must drop the pod while it still serves: some drain is required.
        assert drain > 0, name
        assert spec["terminationGracePeriodSeconds"] > drain + grace, name


@renderers
@overlays
def test_each_service_scales_by_autoscaler_within_a_disruption_budget(
    renderer: str, overlay: str
) -> None:
    resources = rendered(renderer, overlay)
    autoscalers = by_kind(resources, "HorizontalPodAutoscaler")
    budgets = by_kind(resources, "PodDisruptionBudget")
    pods = {name: pod_labels(w) for name, w in workloads(resources).items()}
    for name in SERVICES:
        deployment = the(resources, "Deployment", name)
        # The autoscaler owns the replica count; a fixed count would fight it on every apply.
        assert "replicas" not in deployment["spec"], name
        targets = [
            a
            for a in autoscalers.values()
            if a["spec"]["scaleTargetRef"]
            == {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
        ]
        assert len(targets) == 1, name
        autoscaler = targets[0]["spec"]
        assert 1 <= autoscaler["minReplicas"] <= autoscaler["maxReplicas"], name
        covering = [
            budget["spec"]
            for budget in budgets.values()
            if selector_matches(budget["spec"]["selector"], pods[name])
        ]
        assert len(covering) == 1, name
        # A budget must select this service's pods only, and must let a node drain proceed.
        assert [
            other
            for other, labels in pods.items()
            if selector_matches(covering[0]["selector"], labels)
        ] == [name]
        assert covering[0].get("maxUnavailable", 0) >= 1 or (
            covering[0]["minAvailable"] < autoscaler["minReplicas"]
        ), name


@renderers
@overlays
def test_pods_spread_over_zones_and_nodes(renderer: str, overlay: str) -> None:
    resources = rendered(renderer, overlay)
    for name in SERVICES:
        deployment = the(resources, "Deployment", name)
        constraints = pod_spec(deployment)["topologySpreadConstraints"]
        assert {c["topologyKey"] for c in constraints} == {
            "topology.kubernetes.io/zone",
            "kubernetes.io/hostname",
        }
        for constraint in constraints:
            assert selector_matches(constraint["labelSelector"], pod_labels(deployment)), name


@renderers
@overlays
def test_every_service_reaches_the_declared_ports_of_exactly_one_workload(
    renderer: str, overlay: str
) -> None:
    resources = rendered(renderer, overlay)
    for service in by_kind(resources, "Service").values():
        selector = {"matchLabels": service["spec"]["selector"]}
        targets = [
            w for w in workloads(resources).values() if selector_matches(selector, pod_labels(w))
        ]
        assert len(targets) == 1, service["metadata"]["name"]
        ports = {
            (p.get("name"), p["containerPort"])
            for c in containers_of(pod_spec(targets[0]))
            for p in c.get("ports", [])
        }
        for port in service["spec"]["ports"]:
            assert (port["targetPort"], port["port"]) in ports, port


@renderers
@pytest.mark.parametrize("kustomization", RUNNING_KUSTOMIZATIONS)
def test_images_are_pinned_to_a_registry_and_release(renderer: str, kustomization: str) -> None:
    resources = rendered(renderer, kustomization)
    images = [ImageReference.parse(c["image"]) for _, _, c in all_containers(resources)]
    for image in images:
        assert "/" in image.name, f"{image} names no registry or repository"
        assert image.tag or image.digest, str(image)
        assert image.tag != "latest", str(image)
    if kustomization in OVERLAYS:
        # One release: every Nemo image of an overlay carries the same tag.
        assert len({image.tag for image in images}) == 1


@renderers
@overlays
def test_ingress_publishes_only_the_mcp_endpoint_and_the_console_over_tls(
    renderer: str, overlay: str
) -> None:
    resources = rendered(renderer, overlay)
    ingresses = by_kind(resources, "Ingress")
    assert sorted(ingresses) == ["nemo-console", "nemo-mcp"]
    published = {
        "nemo-mcp": [("/mcp", "Exact", {"name": "nemo-toolplane", "port": {"name": "mcp"}})],
        # Under a path of the platform's host: the console serves its pages under the same one.
        "nemo-console": [
            ("/console", "Prefix", {"name": "nemo-console", "port": {"name": "http"}})
        ],
    }
    for name, expected in published.items():
        spec = ingresses[name]["spec"]
        hosts = {rule["host"] for rule in spec["rules"]}
        assert hosts <= {host for tls in spec["tls"] for host in tls["hosts"]}
        assert all(tls["secretName"] for tls in spec["tls"])
        paths = [path for rule in spec["rules"] for path in rule["http"]["paths"]]
        assert [(p["path"], p["pathType"], p["backend"]["service"]) for p in paths] == expected
    [config] = [
        c for n, c in by_kind(resources, "ConfigMap").items() if n.startswith("nemo-console-config")
    ]
    console = config["data"]["NEMO_CONSOLE_PUBLIC_URL"]
    [console_host] = {rule["host"] for rule in ingresses["nemo-console"]["spec"]["rules"]}
    assert console == f"https://{console_host}/console"
