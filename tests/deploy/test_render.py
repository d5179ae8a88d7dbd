"""Rendering: the pure-Python renderer is the same as `kubectl kustomize` on every kustomization
of the tree (compared where kubectl is installed), and its parts behave like kustomize's."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.deploy.deploy_kustomize import (
    ImageReference,
    KustomizeError,
    config_map_hash,
    render,
    strategic_merge,
)
from tests.deploy.deploy_manifests import KUBECTL, KUSTOMIZATIONS, key, rendered

if KUBECTL is not None:
    # Defined only where kubectl exists: without it there is nothing to compare with.

    @pytest.mark.parametrize("kustomization", sorted(KUSTOMIZATIONS))
    def test_python_renderer_agrees_with_kubectl(kustomization: str) -> None:
        python = {key(r): r for r in rendered("python", kustomization)}
        kubectl = {key(r): r for r in rendered("kubectl", kustomization)}
        assert sorted(python) == sorted(kubectl)
        for identity, resource in kubectl.items():
            assert python[identity] == resource, f"{identity} differs"


@pytest.mark.parametrize(
    ("data", "suffix"),
    [
        # Both vectors come from `kubectl kustomize` (kustomize v5.5).
        ({"a": "b"}, "4h2mbtbbt6"),
        (
            {
                "f.txt": 'line one <b>&amp;\n\ttabbed "quoted" \\ back\nunicode: học sinh\n',
                "k": "1",
            },
            "h47h64dm7h",
        ),
    ],
)
def test_config_map_suffix_is_kustomizes(data: dict[str, str], suffix: str) -> None:
    assert config_map_hash(data) == suffix


def _write(directory: Path, files: dict[str, object]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (directory / name).write_text(yaml.safe_dump(content))


def test_generated_config_map_is_renamed_everywhere_it_is_used(tmp_path: Path) -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "app"},
        "spec": {
            "selector": {"matchLabels": {"app": "a"}},
            "template": {
                "metadata": {"labels": {"app": "a"}},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "app",
                            "envFrom": [{"configMapRef": {"name": "settings"}}],
                            "env": [
                                {
                                    "name": "X",
                                    "valueFrom": {
                                        "configMapKeyRef": {"name": "settings", "key": "A"}
                                    },
                                }
                            ],
                        }
                    ],
                    "volumes": [{"name": "v", "configMap": {"name": "settings"}}],
                },
            },
        },
    }
    _write(
        tmp_path / "base",
        {
            "kustomization.yaml": {
                "resources": ["app.yaml"],
                "configMapGenerator": [{"name": "settings", "literals": ["A=1"]}],
            },
            "app.yaml": deployment,
        },
    )
    _write(
        tmp_path / "overlay",
        {
            "kustomization.yaml": {
                "namespace": "team",
                "resources": ["../base"],
                "configMapGenerator": [
                    {"name": "settings", "behavior": "merge", "literals": ["B=2"]}
                ],
            }
        },
    )
    resources = render(tmp_path / "overlay")
    config_map = next(r for r in resources if r["kind"] == "ConfigMap")
    name = f"settings-{config_map_hash({'A': '1', 'B': '2'})}"
    assert config_map["metadata"] == {"name": name, "namespace": "team"}
    spec = next(r for r in resources if r["kind"] == "Deployment")["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert container["envFrom"][0]["configMapRef"]["name"] == name
    assert container["env"][0]["valueFrom"]["configMapKeyRef"]["name"] == name
    assert spec["volumes"][0]["configMap"]["name"] == name


def test_unsupported_kustomize_fields_are_refused(tmp_path: Path) -> None:
    _write(tmp_path, {"kustomization.yaml": {"commonLabels": {"a": "b"}, "resources": []}})
    with pytest.raises(KustomizeError, match="commonLabels"):
        render(tmp_path)


def test_strategic_merge_merges_keyed_lists_and_replaces_the_rest() -> None:
    original = {
        "containers": [
            {"name": "a", "image": "a", "resources": {"limits": {"cpu": "1"}}, "args": ["x"]},
            {"name": "b", "image": "b"},
        ],
        "tolerations": [{"key": "k1"}],
    }
    patch = {
        "containers": [{"name": "a", "resources": {"requests": {"cpu": "1m"}}, "args": ["y"]}],
        "tolerations": [{"key": "k2"}],
    }
    assert strategic_merge(original, patch) == {
        "containers": [
            {
                "name": "a",
                "image": "a",
                "resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "1m"}},
                "args": ["y"],
            },
            {"name": "b", "image": "b"},
        ],
        "tolerations": [{"key": "k2"}],
    }
    # The patch's items come first, in its order, then the original's others (as kubectl does).
    reordering = {"volumes": [{"name": "c", "emptyDir": {}}, {"name": "b", "secret": {}}]}
    volumes = strategic_merge(
        {"volumes": [{"name": "a"}, {"name": "b"}, {"name": "d"}]}, reordering
    )["volumes"]
    assert volumes == [
        {"name": "c", "emptyDir": {}},
        {"name": "b", "secret": {}},
        {"name": "a"},
        {"name": "d"},
    ]


@pytest.mark.parametrize(
    ("reference", "name", "tag", "digest"),
    [
        ("nemo-context", "nemo-context", None, None),
        ("registry:5000/nemo/context:1.2", "registry:5000/nemo/context", "1.2", None),
        ("registry:5000/nemo/context", "registry:5000/nemo/context", None, None),
        ("nemo/ops:1@sha256:ab", "nemo/ops", "1", "sha256:ab"),
    ],
)
def test_image_references_split_like_kustomize(
    reference: str, name: str, tag: str | None, digest: str | None
) -> None:
    image = ImageReference.parse(reference)
    assert (image.name, image.tag, image.digest) == (name, tag, digest)
    assert str(image) == reference
