"""Network paths: default deny, then exactly the paths the design lists, computed from the
rendered NetworkPolicies over a modelled cluster.

The model holds the overlay's pods (from the rendered workloads), the collector (from the
rendered observability kustomization), cluster DNS, the ingress controller, an internal
caller, a pod of an unlabelled namespace that copies the Nemo pods' labels, a stray pod in the
Nemo namespace, and addresses outside the pod network: PostgreSQL, the S3 endpoint, public
addresses (the model providers) and the cloud metadata address. Every connection the policies
allow between them is compared with the expected list: a missing or an extra path fails.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.deploy.deploy_kustomize import containers_of
from tests.deploy.deploy_manifests import (
    MIGRATION_JOB,
    OVERLAYS,
    PHASE_LABEL,
    RENDERERS,
    by_kind,
    pod_labels,
    pod_spec,
    rendered,
    workloads,
)
from tests.deploy.deploy_netpol import (
    Cluster,
    Connection,
    External,
    Pod,
    PortSpec,
    selector_matches,
)

DNS = (PortSpec(53, "UDP"), PortSpec(53, "TCP"))
HTTPS = PortSpec(443)

#: Where the overlays put the data stores (the CIDRs of the data-store policies).
POSTGRESQL = External("postgresql", "10.0.64.20", (PortSpec(5432),))
S3_ENDPOINT = External("s3-endpoint", "10.0.72.20", (HTTPS,))
IDENTITY_PROVIDER = External("identity-provider", "10.0.80.20", (HTTPS,))
OUTSIDE = [
    POSTGRESQL,
    S3_ENDPOINT,
    IDENTITY_PROVIDER,
    External("model-provider", "203.0.113.10", (HTTPS, PortSpec(80))),
    External("model-provider-ipv6", "2001:db8::10", (HTTPS,)),
    External("cloud-metadata", "169.254.169.254", (PortSpec(80),)),
    External("other-private-service", "10.200.0.5", (HTTPS, PortSpec(5432))),
]

SERVICES = ("nemo-context", "nemo-gateway", "nemo-toolplane")
CONSOLE = "nemo-console"
PURGE_JOB = "nemo-purge"
NEMO_PODS = (*SERVICES, CONSOLE, MIGRATION_JOB, PURGE_JOB, "stray-pod")
POOLER = "nemo-pgbouncer"
#: Overlays whose services send their statements through the pooler.
POOLED_OVERLAYS = {"prod"}


def _expected(overlay: str) -> set[Connection]:
    """The design's list of paths, one line per reason."""
    paths: set[Connection] = set()
    if overlay in POOLED_OVERLAYS:
        # The context service and the tool plane send statements to the pooler, which alone
        # passes them on to PostgreSQL; the tool plane keeps its direct path for its change
        # listener (below), the context service has none.
        paths |= {
            Connection(service, POOLER, 6432) for service in ("nemo-context", "nemo-toolplane")
        }
        paths.add(Connection(POOLER, "postgresql", 5432))
        paths |= {Connection(POOLER, "kube-dns", p.port, p.protocol) for p in DNS}
    else:
        paths.add(Connection("nemo-context", "postgresql", 5432))
    if overlay == "dev-local-model":
        # The gateway, and nothing else, calls the local model server; the server calls nothing
        # but cluster DNS, like every pod of the namespace.
        paths.add(Connection("nemo-gateway", "nemo-local-model", 8000))
        paths |= {Connection("nemo-local-model", "kube-dns", p.port, p.protocol) for p in DNS}
    # DNS egress for every pod of the namespace (even one nobody planned for).
    paths |= {Connection(pod, "kube-dns", p.port, p.protocol) for pod in NEMO_PODS for p in DNS}
    # The three services and the console export OTLP to the collector.
    paths |= {Connection(service, "otel-collector", 4317) for service in (*SERVICES, CONSOLE)}
    # People reach the console through the ingress controller only; it calls the services.
    paths.add(Connection("ingress-controller", CONSOLE, 8000))
    paths.add(Connection(CONSOLE, "nemo-toolplane", 50053))
    paths.add(Connection(CONSOLE, "nemo-context", 50051))
    paths.add(Connection(CONSOLE, "nemo-gateway", 50052))
    # The console signs people in at the OpenID provider; the tool plane and the context
    # service fetch its keys to verify people's tokens.
    paths |= {
        Connection(pod, "identity-provider", 443)
        for pod in (CONSOLE, "nemo-toolplane", "nemo-context")
    }
    # External agents reach the MCP edge through the ingress controller only.
    paths.add(Connection("ingress-controller", "nemo-toolplane", 8080))
    # Internal callers (a labelled namespace) reach the gateway's and tool plane's gRPC.
    paths.add(Connection("internal-caller", "nemo-gateway", 50052))
    paths.add(Connection("internal-caller", "nemo-toolplane", 50053))
    # The platform (an internal caller) records a family's data rights requests.
    paths.add(Connection("internal-caller", "nemo-context", 50051))
    # The gateway and the tool plane call the context service.
    paths.add(Connection("nemo-gateway", "nemo-context", 50051))
    paths.add(Connection("nemo-toolplane", "nemo-context", 50051))
    # The gateway, and nothing else, reaches the model providers over HTTPS.
    paths.add(Connection("nemo-gateway", "model-provider", 443))
    paths.add(Connection("nemo-gateway", "model-provider-ipv6", 443))
    # The context service reaches the S3 endpoint (and PostgreSQL, directly or as above).
    paths.add(Connection("nemo-context", "s3-endpoint", 443))
    # The tool plane and the migration Job reach PostgreSQL.
    paths.add(Connection("nemo-toolplane", "postgresql", 5432))
    paths.add(Connection(MIGRATION_JOB, "postgresql", 5432))
    # The nightly purge reaches PostgreSQL and the S3 endpoint (expired snapshots).
    paths.add(Connection(PURGE_JOB, "postgresql", 5432))
    paths.add(Connection(PURGE_JOB, "s3-endpoint", 443))
    return paths


def _pods_of(resources: list[dict[str, Any]], namespace: str) -> list[Pod]:
    pods = []
    for name, workload in workloads(resources).items():
        ports = tuple(
            PortSpec(port["containerPort"], port.get("protocol", "TCP"))
            for container in containers_of(pod_spec(workload))
            for port in container.get("ports", [])
        )
        pods.append(Pod(name, namespace, pod_labels(workload), ports))
    return pods


def _cluster(renderer: str, overlay_resources: list[dict[str, Any]]) -> tuple[Cluster, str]:
    namespace_object = next(iter(by_kind(overlay_resources, "Namespace").values()))
    namespace = namespace_object["metadata"]["name"]
    observability = rendered(renderer, "observability")
    observability_namespace = next(iter(by_kind(observability, "Namespace").values()))

    cluster = Cluster()
    cluster.add_namespace(namespace, namespace_object["metadata"].get("labels"))
    cluster.add_namespace(
        observability_namespace["metadata"]["name"],
        observability_namespace["metadata"].get("labels"),
    )
    cluster.add_namespace("kube-system")
    cluster.add_namespace("ingress-nginx")
    cluster.add_namespace("learning-platform", {"nemo-ai-plane/caller": "internal"})
    cluster.add_namespace("unrelated")
    for pod in _pods_of(overlay_resources, namespace):
        cluster.add(pod)
    for pod in _pods_of(observability, observability_namespace["metadata"]["name"]):
        cluster.add(pod)
    cluster.add(Pod("stray-pod", namespace, {"app": "debug"}, (PortSpec(8000),)))
    cluster.add(Pod("kube-dns", "kube-system", {"k8s-app": "kube-dns"}, DNS))
    controller = {
        "app.kubernetes.io/name": "ingress-nginx",
        "app.kubernetes.io/component": "controller",
    }
    cluster.add(Pod("ingress-controller", "ingress-nginx", controller, (HTTPS,)))
    cluster.add(Pod("internal-caller", "learning-platform", {"app": "platform-api"}))
    # Same labels as the Nemo pods, wrong namespace: labels alone must not open a door.
    cluster.add(Pod("impostor", "unrelated", {"app.kubernetes.io/name": "nemo-gateway"}))
    for external in OUTSIDE:
        cluster.add(external)
    cluster.policies = [
        *by_kind(overlay_resources, "NetworkPolicy").values(),
        *by_kind(observability, "NetworkPolicy").values(),
    ]
    return cluster, namespace


renderers = pytest.mark.parametrize("renderer", RENDERERS)
overlays = pytest.mark.parametrize("overlay", sorted(OVERLAYS))


@renderers
@overlays
def test_everything_is_denied_by_default(renderer: str, overlay: str) -> None:
    policies = by_kind(rendered(renderer, overlay), "NetworkPolicy")
    deny_all = [
        policy
        for policy in policies.values()
        if policy["spec"]["podSelector"] == {}
        and set(policy["spec"]["policyTypes"]) == {"Ingress", "Egress"}
        and not policy["spec"].get("ingress")
        and not policy["spec"].get("egress")
    ]
    assert len(deny_all) == 1


@renderers
@overlays
def test_exactly_the_designed_paths_are_open(renderer: str, overlay: str) -> None:
    resources = rendered(renderer, overlay)
    cluster, namespace = _cluster(renderer, resources)
    allowed = cluster.allowed([namespace])
    expected = _expected(overlay)
    assert sorted(map(str, allowed - expected)) == [], "paths nobody asked for"
    assert sorted(map(str, expected - allowed)) == [], "designed paths that are closed"


@renderers
@overlays
def test_only_the_gateway_leaves_the_private_network(renderer: str, overlay: str) -> None:
    cluster, namespace = _cluster(renderer, rendered(renderer, overlay))
    public = {"model-provider", "model-provider-ipv6", "cloud-metadata"}
    leaving = {c.source for c in cluster.allowed([namespace]) if c.destination in public}
    assert leaving == {"nemo-gateway"}


@renderers
@overlays
def test_the_migration_phase_alone_lets_the_job_reach_the_database(
    renderer: str, overlay: str
) -> None:
    # deploy.sh applies only the phase-labelled objects before the Job runs: with just those,
    # the Job must already resolve names and reach PostgreSQL, and nothing else is open.
    resources = [
        r
        for r in rendered(renderer, overlay)
        if r["metadata"].get("labels", {}).get(PHASE_LABEL) == "migrate"
    ]
    cluster, namespace = _cluster(renderer, resources)
    from_job = {c for c in cluster.allowed([namespace]) if c.source == MIGRATION_JOB}
    assert from_job == {
        Connection(MIGRATION_JOB, "kube-dns", 53, "UDP"),
        Connection(MIGRATION_JOB, "kube-dns", 53, "TCP"),
        Connection(MIGRATION_JOB, "postgresql", 5432),
    }


def test_a_path_needs_both_the_senders_egress_and_the_receivers_ingress() -> None:
    resources = rendered("python", "prod")
    policies = by_kind(resources, "NetworkPolicy")
    # Every pod may now send to the context service, but it still admits only its callers.
    policies["allow-context-egress"]["spec"]["podSelector"] = {}
    cluster, namespace = _cluster("python", resources)
    assert cluster.allowed([namespace]) == _expected("prod")
    # Once the receiver admits everyone too, the stray pod, the Job and the pooler get through.
    policies["allow-context-ingress"]["spec"]["ingress"][0]["from"] = [{"podSelector": {}}]
    cluster, namespace = _cluster("python", resources)
    assert cluster.allowed([namespace]) - _expected("prod") == {
        Connection("stray-pod", "nemo-context", 50051),
        Connection(MIGRATION_JOB, "nemo-context", 50051),
        Connection(PURGE_JOB, "nemo-context", 50051),
        Connection(POOLER, "nemo-context", 50051),
    }


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        ({}, {"a": "1"}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "2"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]}]}, {}, False),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {}, True),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""}, True),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": "1"}, False),
    ],
)
def test_label_selectors_follow_kubernetes(
    selector: dict[str, Any], labels: dict[str, str], matches: bool
) -> None:
    assert selector_matches(selector, labels) is matches


def test_ip_blocks_honour_except_ranges_and_address_families() -> None:
    cluster = Cluster()
    cluster.add_namespace("n")
    cluster.add(Pod("client", "n", {}))
    for name, address in (("public", "198.51.100.1"), ("private", "10.1.1.1"), ("v6", "::1")):
        cluster.add(External(name, address, (HTTPS,)))
    block = {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}
    cluster.policies = [
        {
            "metadata": {"name": "p", "namespace": "n"},
            "spec": {"podSelector": {}, "egress": [{"to": [{"ipBlock": block}]}]},
        }
    ]
    assert cluster.allowed(["n"]) == {Connection("client", "public", 443)}
