"""Every rendered object is valid against the Kubernetes API schemas, offline.

The schemas are those kubernetes-validate ships for its newest Kubernetes version, in strict
mode: an unknown or misspelt field fails, as `kubectl apply --validate=strict` would.
"""

from __future__ import annotations

import copy

import pytest
from kubernetes_validate import utils as kubernetes_schemas  # type: ignore[import-untyped]

from tests.deploy.deploy_manifests import KUSTOMIZATIONS, RENDERERS, rendered, the

KUBERNETES_VERSION = kubernetes_schemas.latest_version()


def _schema_errors(resource: dict[str, object]) -> str | None:
    try:
        kubernetes_schemas.validate(resource, KUBERNETES_VERSION, strict=True)
    except kubernetes_schemas.ValidationError as error:
        return f"{'.'.join(map(str, error.path))}: {error.message}"
    return None


def test_a_current_kubernetes_version_is_used() -> None:
    major, minor = (int(part) for part in KUBERNETES_VERSION.split(".")[:2])
    assert (major, minor) >= (1, 33)


@pytest.mark.parametrize("renderer", RENDERERS)
@pytest.mark.parametrize("kustomization", sorted(KUSTOMIZATIONS))
def test_every_object_matches_its_schema(renderer: str, kustomization: str) -> None:
    resources = rendered(renderer, kustomization)
    assert resources
    errors = {
        f"{r['kind']}/{r['metadata']['name']}": error
        for r in resources
        if (error := _schema_errors(r)) is not None
    }
    assert errors == {}


def test_a_misspelt_field_is_caught() -> None:
    deployment = copy.deepcopy(the(rendered("python", "prod"), "Deployment", "nemo-context"))
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["readinesProbe"] = container.pop("readinessProbe")
    assert _schema_errors(deployment) is not None
