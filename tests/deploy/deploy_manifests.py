"""The rendered deploy/k8s manifests and what the deploy tests read from them.

Every kustomization is rendered by each available renderer: the pure-Python one always, and
`kubectl kustomize` where kubectl is installed, so the policy tests check what a cluster would
really receive.
"""

from __future__ import annotations

import base64
import copy
import functools
import importlib.util
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from tests.deploy.deploy_kustomize import Resource, containers_of, pod_specs, render

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"
DOCKER = REPO / "deploy" / "docker"

#: The overlays a platform engineer applies, by name.
OVERLAYS: Mapping[str, Path] = {
    name: K8S / "overlays" / name for name in ("dev", "dev-local-model", "prod")
}
#: Every kustomization of the tree: the overlays, the shared collector and the base.
KUSTOMIZATIONS: Mapping[str, Path] = {
    **OVERLAYS,
    "observability": K8S / "observability",
    "base": K8S / "base",
}

KUBECTL = shutil.which("kubectl")
RENDERERS: tuple[str, ...] = ("python", "kubectl") if KUBECTL else ("python",)

#: The three services: Deployment name, container name, settings prefix and gRPC port.
SERVICES: Mapping[str, tuple[str, str, int]] = {
    "nemo-context": ("context", "NEMO_CONTEXT_", 50051),
    "nemo-gateway": ("gateway", "NEMO_GATEWAY_", 50052),
    "nemo-toolplane": ("toolplane", "NEMO_TOOLPLANE_", 50053),
}
MIGRATION_JOB = "nemo-migrate"
PHASE_LABEL = "nemo-ai-plane/deploy-phase"


@functools.cache
def _rendered(renderer: str, directory: Path) -> tuple[Resource, ...]:
    if renderer == "python":
        return tuple(render(directory))
    if KUBECTL is None:
        raise RuntimeError("kubectl is not installed")
    output = subprocess.run(
        [KUBECTL, "kustomize", str(directory)],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    return tuple(document for document in yaml.safe_load_all(output) if document)


def rendered(renderer: str, kustomization: str) -> list[Resource]:
    """A fresh copy of the objects ``renderer`` renders for ``kustomization``."""
    return copy.deepcopy(list(_rendered(renderer, KUSTOMIZATIONS[kustomization])))


def key(resource: Mapping[str, Any]) -> tuple[str, str, str]:
    """(kind, namespace, name): what identifies an object in a cluster."""
    metadata = resource["metadata"]
    return resource["kind"], metadata.get("namespace", ""), metadata["name"]


def by_kind(resources: list[Resource], kind: str) -> dict[str, Resource]:
    """Objects of one kind, by name."""
    return {r["metadata"]["name"]: r for r in resources if r["kind"] == kind}


def the(resources: list[Resource], kind: str, name: str) -> Resource:
    """The one object of ``kind`` called ``name``."""
    return by_kind(resources, kind)[name]


def workloads(resources: list[Resource]) -> dict[str, Resource]:
    """Objects that run pods, by name."""
    return {r["metadata"]["name"]: r for r in resources if any(True for _ in pod_specs(r))}


def pod_spec(workload: Mapping[str, Any]) -> dict[str, Any]:
    """The pod spec of a workload."""
    return next(pod_specs(workload))


def pod_labels(workload: Mapping[str, Any]) -> dict[str, str]:
    """The labels of a workload's pods."""
    spec = workload["spec"]
    # A CronJob's pods come from its job template.
    template = (spec.get("jobTemplate") or {}).get("spec", spec)["template"]
    labels: dict[str, str] = template["metadata"]["labels"]
    return labels


def all_containers(resources: list[Resource]) -> Iterator[tuple[str, dict[str, Any], Any]]:
    """(workload name, pod spec, container) for every container of every workload."""
    for name, workload in workloads(resources).items():
        spec = pod_spec(workload)
        for container in containers_of(spec):
            yield name, spec, container


def container_environment(
    resources: list[Resource], container: Mapping[str, Any]
) -> dict[str, str]:
    """The environment a container starts with from ConfigMaps and literal values (secret
    references are left out)."""
    config_maps = by_kind(resources, "ConfigMap")
    environment: dict[str, str] = {}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            environment.update(config_maps[source["configMapRef"]["name"]]["data"])
    for variable in container.get("env", []):
        if "value" in variable:
            environment[variable["name"]] = variable["value"]
    return environment


def secret_references(pod: Mapping[str, Any]) -> dict[str, set[str] | None]:
    """Secrets a pod spec uses, with the keys it needs (None: every key, as envFrom or a whole
    volume takes them)."""
    references: dict[str, set[str] | None] = {}

    def need(name: str, keys: set[str] | None) -> None:
        if name in references and references[name] is None:
            return
        references[name] = None if keys is None else (references.get(name) or set()) | keys

    for container in containers_of(pod):
        for source in container.get("envFrom", []):
            if "secretRef" in source:
                need(source["secretRef"]["name"], None)
        for variable in container.get("env", []):
            reference = variable.get("valueFrom", {}).get("secretKeyRef")
            if reference is not None:
                need(reference["name"], {reference["key"]})
    for volume in pod.get("volumes", []):
        sources = [volume, *volume.get("projected", {}).get("sources", [])]
        for source in sources:
            secret = source.get("secret")
            if secret is None:
                continue
            name = secret.get("secretName") or secret["name"]
            items = secret.get("items")
            need(name, {item["key"] for item in items} if items else None)
    return references


def optional_secrets(pod: Mapping[str, Any]) -> set[str]:
    """Secrets a pod starts without (``optional: true``)."""
    optional: set[str] = set()
    for container in containers_of(pod):
        for source in container.get("envFrom", []):
            reference = source.get("secretRef")
            if reference is not None and reference.get("optional"):
                optional.add(reference["name"])
    for volume in pod.get("volumes", []):
        secret = volume.get("secret")
        if secret is not None and secret.get("optional"):
            optional.add(secret["secretName"])
    return optional


def load_create_secrets() -> Any:
    """deploy/k8s/create_secrets.py as a module (it is a standalone script, not a package)."""
    path = K8S / "create_secrets.py"
    spec = importlib.util.spec_from_file_location("nemo_create_secrets", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def decoded(secret: Mapping[str, Any]) -> dict[str, str]:
    """A Secret's data, decoded."""
    return {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}


def materialize_environment(
    resources: list[Resource],
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    secrets: Mapping[str, Mapping[str, str]],
    root: Path,
) -> dict[str, str]:
    """The environment ``container`` would start with, its secret volumes written under
    ``root`` as the kubelet would mount them and every path into them moved there.

    ``secrets`` holds the decoded data of each Secret by name; optional Secrets may be absent.
    """
    volumes = {volume["name"]: volume for volume in pod.get("volumes", [])}
    moved: dict[str, Path] = {}
    for mount in container.get("volumeMounts", []):
        secret = volumes[mount["name"]].get("secret")
        if secret is None:
            continue
        directory = root / mount["name"]
        directory.mkdir(parents=True)
        if secret.get("optional") and secret["secretName"] not in secrets:
            # The kubelet mounts an empty directory for an optional Secret that is absent.
            moved[mount["mountPath"]] = directory
            continue
        data = secrets[secret["secretName"]]
        files = {item["key"]: item["path"] for item in secret.get("items", [])} or {
            key: key for key in data
        }
        for key, file_name in files.items():
            (directory / file_name).write_text(data[key], encoding="utf-8")
        moved[mount["mountPath"]] = directory
    environment = container_environment(resources, container)
    for source in container.get("envFrom", []):
        reference = source.get("secretRef")
        if reference is not None and reference["name"] in secrets:
            environment.update(secrets[reference["name"]])
    for variable in container.get("env", []):
        reference = variable.get("valueFrom", {}).get("secretKeyRef")
        if reference is not None:
            environment[variable["name"]] = secrets[reference["name"]][reference["key"]]
    for name, value in environment.items():
        for mount_path, directory in moved.items():
            if value.startswith(mount_path + "/"):
                environment[name] = str(directory / value.removeprefix(mount_path + "/"))
    return environment
