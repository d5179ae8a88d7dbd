"""Which connections Kubernetes NetworkPolicies allow, computed over a modelled cluster.

The model is a set of endpoints: pods (namespace, labels, listening ports) and addresses
outside the pod network (an IP and its ports). A connection from a source to a destination port
is allowed when the source's egress allows it and, for a pod destination, the destination's
ingress allows it, with the NetworkPolicy semantics of networking.k8s.io/v1:

- a pod is isolated for a direction once any policy of its namespace selects it for that
  direction (``policyTypes``, which defaults to Ingress plus Egress when egress rules exist);
  an isolated pod accepts only what some selecting policy's rule allows, others allow all;
- a rule with no peers matches every peer, and one with no ports every port;
- ``podSelector`` alone selects pods of the policy's namespace, ``namespaceSelector`` alone all
  pods of the matching namespaces, both together the matching pods of matching namespaces;
  namespaces carry the automatic ``kubernetes.io/metadata.name`` label;
- ``ipBlock`` selects addresses outside the pod network (a CIDR minus its ``except`` ranges);
  pods are never matched by an ipBlock here, as clusters differ on that and the manifests
  never rely on it;
- ports match by number and protocol (TCP by default), with ``endPort`` ranges; named ports
  are refused, the manifests use numbers.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True)
class PortSpec:
    port: int
    protocol: str = "TCP"


@dataclass(frozen=True)
class Pod:
    name: str
    namespace: str
    labels: Mapping[str, str]
    ports: tuple[PortSpec, ...] = ()


@dataclass(frozen=True)
class External:
    """An address outside the pod network (a database, a cloud API, the internet)."""

    name: str
    address: str
    ports: tuple[PortSpec, ...]


Endpoint = Pod | External


@dataclass(frozen=True, order=True)
class Connection:
    """An allowed connection: source endpoint, destination endpoint, port and protocol."""

    source: str
    destination: str
    port: int
    protocol: str = "TCP"

    def __str__(self) -> str:
        return f"{self.source} -> {self.destination}:{self.port}/{self.protocol}"


class PolicyError(Exception):
    """A policy uses a construct the evaluator does not model."""


@dataclass
class Cluster:
    """Namespaces (with labels), endpoints and the NetworkPolicies in force."""

    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    endpoints: list[Endpoint] = field(default_factory=list)
    policies: list[Mapping[str, Any]] = field(default_factory=list)

    def add_namespace(self, name: str, labels: Mapping[str, str] | None = None) -> None:
        self.namespaces[name] = {**(labels or {}), NAMESPACE_NAME_LABEL: name}

    def add(self, endpoint: Endpoint) -> None:
        if isinstance(endpoint, Pod) and endpoint.namespace not in self.namespaces:
            raise ValueError(f"namespace {endpoint.namespace!r} of {endpoint.name} is unknown")
        self.endpoints.append(endpoint)

    def allowed(self, governed: Iterable[str]) -> set[Connection]:
        """Every allowed connection that starts or ends at a pod of a ``governed`` namespace
        (connections between other namespaces are their owners' business)."""
        governed = set(governed)
        allowed: set[Connection] = set()
        for source in self.endpoints:
            if not isinstance(source, Pod):
                continue
            for destination in self.endpoints:
                if destination is source or not _touches(source, destination, governed):
                    continue
                for port in destination.ports:
                    if self._egress_allows(source, destination, port) and (
                        isinstance(destination, External)
                        or self._ingress_allows(destination, source, port)
                    ):
                        allowed.add(
                            Connection(source.name, destination.name, port.port, port.protocol)
                        )
        return allowed

    def _selecting(self, pod: Pod, direction: str) -> list[Mapping[str, Any]]:
        return [
            policy
            for policy in self.policies
            if policy["metadata"]["namespace"] == pod.namespace
            and direction in _policy_types(policy)
            and selector_matches(policy["spec"].get("podSelector", {}), pod.labels)
        ]

    def _egress_allows(self, source: Pod, destination: Endpoint, port: PortSpec) -> bool:
        policies = self._selecting(source, "Egress")
        if not policies:
            return True
        return any(
            self._rule_allows(rule, "to", policy, destination, port)
            for policy in policies
            for rule in policy["spec"].get("egress") or []
        )

    def _ingress_allows(self, destination: Pod, source: Pod, port: PortSpec) -> bool:
        policies = self._selecting(destination, "Ingress")
        if not policies:
            return True
        return any(
            self._rule_allows(rule, "from", policy, source, port)
            for policy in policies
            for rule in policy["spec"].get("ingress") or []
        )

    def _rule_allows(
        self,
        rule: Mapping[str, Any],
        peers_field: str,
        policy: Mapping[str, Any],
        peer: Endpoint,
        port: PortSpec,
    ) -> bool:
        ports: Sequence[Mapping[str, Any]] = rule.get("ports") or []
        if ports and not any(_port_matches(entry, port) for entry in ports):
            return False
        peers: Sequence[Mapping[str, Any]] = rule.get(peers_field) or []
        if not peers:
            return True
        namespace = policy["metadata"]["namespace"]
        return any(self._peer_matches(entry, namespace, peer) for entry in peers)

    def _peer_matches(self, entry: Mapping[str, Any], namespace: str, peer: Endpoint) -> bool:
        if "ipBlock" in entry:
            return isinstance(peer, External) and _in_block(entry["ipBlock"], peer.address)
        if isinstance(peer, External):
            return False
        if "namespaceSelector" in entry:
            labels = self.namespaces[peer.namespace]
            if not selector_matches(entry["namespaceSelector"], labels):
                return False
        elif peer.namespace != namespace:
            return False
        return selector_matches(entry.get("podSelector", {}), peer.labels)


def _touches(source: Pod, destination: Endpoint, governed: set[str]) -> bool:
    return source.namespace in governed or (
        isinstance(destination, Pod) and destination.namespace in governed
    )


def _policy_types(policy: Mapping[str, Any]) -> list[str]:
    spec = policy["spec"]
    if "policyTypes" in spec:
        return list(spec["policyTypes"])
    return ["Ingress", *(["Egress"] if "egress" in spec else [])]


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A Kubernetes label selector (``matchLabels`` and ``matchExpressions``)."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression["key"], expression["operator"]
        values = expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
        if operator not in {"In", "NotIn", "Exists", "DoesNotExist"}:
            raise PolicyError(f"unknown selector operator {operator!r}")
    return True


def _port_matches(entry: Mapping[str, Any], port: PortSpec) -> bool:
    if entry.get("protocol", "TCP") != port.protocol:
        return False
    if "port" not in entry:
        return True
    number = entry["port"]
    if not isinstance(number, int):
        raise PolicyError(f"named port {number!r}: use port numbers in NetworkPolicies")
    return number <= port.port <= int(entry.get("endPort", number))


def _in_block(block: Mapping[str, Any], address: str) -> bool:
    ip = ipaddress.ip_address(address)
    network = ipaddress.ip_network(block["cidr"])
    if ip.version != network.version or ip not in network:
        return False
    return not any(ip in ipaddress.ip_network(cidr) for cidr in block.get("except") or [])
