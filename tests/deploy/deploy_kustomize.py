"""A small kustomize, enough to render deploy/k8s where `kubectl kustomize` is not installed.

It covers exactly the features the manifests use and refuses any other field, so a manifest
change that needs more fails loudly here instead of rendering something different from kubectl:

- ``resources``: YAML files and directories holding a ``kustomization.yaml``;
- ``components``: directories holding a ``kind: Component`` kustomization, applied after the
  resources and the including kustomization's own generators and before its transformers, as
  kustomize does (so an overlay cannot merge into a ConfigMap a component generates, and a
  component's labels reach what the overlay generated);
- ``configMapGenerator`` with ``envs``, ``literals`` and ``files``, ``behavior`` create or merge,
  and the content-hash name suffix, with references from pod specs renamed to match;
- ``patches`` given by ``path``: strategic merge patches that find their target by kind and
  name. Lists of containers, env, volumes and volume mounts merge by their key (the patch's
  items first, as kubectl orders them); other lists are replaced, as kubectl does for fields
  without a merge key;
- ``labels`` with ``pairs`` and ``includeTemplates`` (pod templates, never selectors);
- ``images`` with ``newName``, ``newTag`` and ``digest``;
- ``namespace``.

Transformers run in kustomize's order: patches, namespace, labels, images; name suffixes are
computed once, on the final content.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

Resource = dict[str, Any]

KUSTOMIZATION_FILE = "kustomization.yaml"

_SUPPORTED_FIELDS = frozenset(
    {
        "apiVersion",
        "kind",
        "resources",
        "components",
        "configMapGenerator",
        "patches",
        "labels",
        "images",
        "namespace",
    }
)
_SUPPORTED_GENERATOR_FIELDS = frozenset({"name", "behavior", "envs", "literals", "files"})
_SUPPORTED_LABEL_FIELDS = frozenset({"pairs", "includeTemplates", "includeSelectors"})

#: Kinds without a namespace (only those that can appear here).
_CLUSTER_SCOPED = frozenset({"Namespace", "ClusterRole", "ClusterRoleBinding", "StorageClass"})

#: Where kustomize's labels transformer puts template labels (``includeTemplates``).
_TEMPLATE_LABEL_PATHS: Mapping[str, tuple[tuple[str, ...], ...]] = {
    "Deployment": (("spec", "template", "metadata", "labels"),),
    "ReplicaSet": (("spec", "template", "metadata", "labels"),),
    "StatefulSet": (("spec", "template", "metadata", "labels"),),
    "DaemonSet": (("spec", "template", "metadata", "labels"),),
    "Job": (("spec", "template", "metadata", "labels"),),
    "CronJob": (
        ("spec", "jobTemplate", "metadata", "labels"),
        ("spec", "jobTemplate", "spec", "template", "metadata", "labels"),
    ),
}

#: Strategic merge keys of the list fields the patches touch; other lists are replaced.
_MERGE_KEYS: Mapping[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
}


class KustomizeError(Exception):
    """The kustomization uses something this renderer does not cover, or is inconsistent."""


@dataclass
class _Build:
    resources: list[Resource] = field(default_factory=list)
    #: Names of generated ConfigMaps: they get the content-hash suffix at the end.
    generated: set[str] = field(default_factory=set)


def render(directory: Path) -> list[Resource]:
    """Render the kustomization in ``directory`` as `kubectl kustomize` would."""
    build = _build(directory.resolve())
    _apply_name_hashes(build)
    return build.resources


def _build(directory: Path) -> _Build:
    kustomization = _load_kustomization(directory)
    if kustomization.get("kind") == "Component":
        raise KustomizeError(f"{directory} is a Component: list it under `components`")
    build = _Build()
    _add_resources(build, directory, kustomization)
    _generate(build, directory, kustomization)
    for entry in kustomization.get("components", []):
        _apply_component(build, (directory / entry).resolve())
    _transform(build, directory, kustomization)
    return build


def _add_resources(build: _Build, directory: Path, kustomization: Mapping[str, Any]) -> None:
    for entry in kustomization.get("resources", []):
        path = directory / entry
        if path.is_dir():
            child = _build(path)
            build.resources += child.resources
            build.generated |= child.generated
        else:
            build.resources += _load_documents(path)


def _apply_component(build: _Build, directory: Path) -> None:
    """A Component adds its resources to what the including kustomization has so far, then its
    generators and transformers apply to all of it."""
    component = _load_kustomization(directory)
    if component.get("kind") != "Component":
        raise KustomizeError(f"{directory}: a component must be of kind Component")
    _add_resources(build, directory, component)
    _generate(build, directory, component)
    _transform(build, directory, component)


def _generate(build: _Build, directory: Path, kustomization: Mapping[str, Any]) -> None:
    for generator in kustomization.get("configMapGenerator", []):
        _generate_config_map(build, directory, generator)


def _transform(build: _Build, directory: Path, kustomization: Mapping[str, Any]) -> None:
    for patch in kustomization.get("patches", []):
        _apply_patch_file(build.resources, directory, patch)
    if "namespace" in kustomization:
        _set_namespace(build.resources, kustomization["namespace"])
    for labels in kustomization.get("labels", []):
        _add_labels(build.resources, labels)
    for image in kustomization.get("images", []):
        _set_image(build.resources, image)


def _load_kustomization(directory: Path) -> dict[str, Any]:
    path = directory / KUSTOMIZATION_FILE
    if not path.is_file():
        raise KustomizeError(f"{directory} has no {KUSTOMIZATION_FILE}")
    kustomization: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    unsupported = set(kustomization) - _SUPPORTED_FIELDS
    if unsupported:
        raise KustomizeError(f"{path}: unsupported fields {sorted(unsupported)}")
    return kustomization


def _load_documents(path: Path) -> list[Resource]:
    documents = yaml.safe_load_all(path.read_text(encoding="utf-8"))
    return [document for document in documents if document]


# --- configMapGenerator -------------------------------------------------------------------


def _generate_config_map(build: _Build, directory: Path, generator: Mapping[str, Any]) -> None:
    unsupported = set(generator) - _SUPPORTED_GENERATOR_FIELDS
    if unsupported:
        raise KustomizeError(f"configMapGenerator: unsupported fields {sorted(unsupported)}")
    name: str = generator["name"]
    data = _generator_data(directory, generator)
    behavior = generator.get("behavior", "create")
    existing = [
        resource
        for resource in build.resources
        if resource["kind"] == "ConfigMap" and resource["metadata"]["name"] == name
    ]
    if behavior == "create":
        if existing:
            raise KustomizeError(f"configMapGenerator {name!r} already exists; use merge")
        config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
        build.resources.append(config_map | {"data": data})
        build.generated.add(name)
    elif behavior == "merge":
        if len(existing) != 1 or name not in build.generated:
            raise KustomizeError(f"configMapGenerator {name!r}: nothing generated to merge into")
        existing[0]["data"] = existing[0].get("data", {}) | data
    else:
        raise KustomizeError(f"configMapGenerator {name!r}: unsupported behavior {behavior!r}")


def _generator_data(directory: Path, generator: Mapping[str, Any]) -> dict[str, str]:
    data: dict[str, str] = {}
    for env_file in generator.get("envs", []):
        for line in (directory / env_file).read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            data.update([_key_value(line, env_file)])
    for literal in generator.get("literals", []):
        data.update([_key_value(literal, "literals")])
    for entry in generator.get("files", []):
        key, _, source = entry.rpartition("=")
        path = directory / source
        data[key or path.name] = path.read_text(encoding="utf-8")
    return data


def _key_value(line: str, origin: str) -> tuple[str, str]:
    key, separator, value = line.partition("=")
    if not separator or not key:
        raise KustomizeError(f"{origin}: expected KEY=VALUE, got {line!r}")
    return key, value


def _apply_name_hashes(build: _Build) -> None:
    renamed: dict[tuple[str | None, str], str] = {}
    for resource in build.resources:
        metadata = resource["metadata"]
        if resource["kind"] == "ConfigMap" and metadata["name"] in build.generated:
            hashed = f"{metadata['name']}-{config_map_hash(resource['data'])}"
            renamed[(metadata.get("namespace"), metadata["name"])] = hashed
            metadata["name"] = hashed
    for resource in build.resources:
        namespace = resource["metadata"].get("namespace")
        for pod_spec in pod_specs(resource):
            for reference in _config_map_references(pod_spec):
                new_name = renamed.get((namespace, reference["name"]))
                if new_name is not None:
                    reference["name"] = new_name


def config_map_hash(data: Mapping[str, str]) -> str:
    """kustomize's name suffix of a generated ConfigMap: 10 characters derived from the SHA-256
    of the Go JSON encoding of ``{"data", "kind", "name"}``, with some hex digits swapped for
    letters (so it never looks like a number).

    kustomize looks the name up as one field called ``metadata/name``, finds none and encodes
    an empty name, so only the data decides the suffix; the same is done here.
    """
    items = ",".join(f"{_go_json_string(key)}:{_go_json_string(data[key])}" for key in sorted(data))
    encoded = f'{{"data":{{{items}}},"kind":"ConfigMap","name":""}}'
    digest = hashlib.sha256(encoded.encode("utf-8")).hexdigest()
    swaps = {"0": "g", "1": "h", "3": "k", "a": "m", "e": "t"}
    return "".join(swaps.get(character, character) for character in digest[:10])


def _go_json_string(text: str) -> str:
    """A string as Go's encoding/json writes it (HTML characters escaped)."""
    out = ['"']
    for character in text:
        if character in '"\\':
            out.append("\\" + character)
        elif character == "\n":
            out.append("\\n")
        elif character == "\r":
            out.append("\\r")
        elif character == "\t":
            out.append("\\t")
        elif ord(character) < 0x20 or character in "<>&\u2028\u2029":
            out.append(f"\\u{ord(character):04x}")
        else:
            out.append(character)
    out.append('"')
    return "".join(out)


def pod_specs(resource: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The pod specs of a workload (none for other kinds)."""
    kind = resource.get("kind")
    spec = resource.get("spec", {})
    if kind in _TEMPLATE_LABEL_PATHS and kind != "CronJob":
        yield spec["template"]["spec"]
    elif kind == "CronJob":
        yield spec["jobTemplate"]["spec"]["template"]["spec"]
    elif kind == "Pod":
        yield spec


def containers_of(pod_spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Init containers and containers of a pod spec."""
    return [*pod_spec.get("initContainers", []), *pod_spec.get("containers", [])]


def _config_map_references(pod_spec: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    for container in containers_of(pod_spec):
        for source in container.get("envFrom", []):
            if "configMapRef" in source:
                yield source["configMapRef"]
        for variable in container.get("env", []):
            reference = variable.get("valueFrom", {}).get("configMapKeyRef")
            if reference is not None:
                yield reference
    for volume in pod_spec.get("volumes", []):
        if "configMap" in volume:
            yield volume["configMap"]
        for source in volume.get("projected", {}).get("sources", []):
            if "configMap" in source:
                yield source["configMap"]


# --- patches ------------------------------------------------------------------------------


def _apply_patch_file(resources: list[Resource], directory: Path, patch: Mapping[str, Any]) -> None:
    if set(patch) != {"path"}:
        raise KustomizeError(f"patches: only path is supported, got {sorted(patch)}")
    for document in _load_documents(directory / patch["path"]):
        target = _find_patch_target(resources, document)
        merged = strategic_merge(target, document)
        target.clear()
        target.update(merged)


def _find_patch_target(resources: Iterable[Resource], patch: Mapping[str, Any]) -> Resource:
    group = _api_group(patch["apiVersion"])
    metadata = patch["metadata"]
    matches = [
        resource
        for resource in resources
        if resource["kind"] == patch["kind"]
        and _api_group(resource["apiVersion"]) == group
        and resource["metadata"]["name"] == metadata["name"]
        and resource["metadata"].get("namespace") == metadata.get("namespace")
    ]
    if len(matches) != 1:
        raise KustomizeError(
            f"patch for {patch['kind']}/{metadata['name']} matches {len(matches)} resources"
        )
    return matches[0]


def _api_group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def strategic_merge(original: Any, patch: Any, field_name: str = "") -> Any:
    """``patch`` merged into ``original`` (both left unchanged), with strategic list merging
    for the fields of :data:`_MERGE_KEYS`."""
    if isinstance(patch, dict) and isinstance(original, dict):
        if any(key.startswith("$") for key in patch):
            raise KustomizeError(f"patch directives are not supported: {sorted(patch)}")
        merged = copy.deepcopy(original)
        for key, value in patch.items():
            if value is None:
                merged.pop(key, None)
            elif key in merged:
                merged[key] = strategic_merge(merged[key], value, key)
            else:
                merged[key] = copy.deepcopy(value)
        return merged
    if isinstance(patch, list) and isinstance(original, list) and field_name in _MERGE_KEYS:
        return _merge_list(original, patch, _MERGE_KEYS[field_name], field_name)
    return copy.deepcopy(patch)


def _merge_list(original: list[Any], patch: list[Any], key: str, field_name: str) -> list[Any]:
    # kustomize puts the patch's items first, in its order (each merged into the original's item
    # of the same key, if any), then the original's other items in theirs.
    by_key = {item[key]: item for item in original}
    merged = [
        strategic_merge(by_key[item[key]], item, field_name)
        if item[key] in by_key
        else copy.deepcopy(item)
        for item in patch
    ]
    patched = {item[key] for item in patch}
    return merged + [copy.deepcopy(item) for item in original if item[key] not in patched]


# --- namespace, labels, images ------------------------------------------------------------


def _set_namespace(resources: Iterable[Resource], namespace: str) -> None:
    for resource in resources:
        if resource["kind"] not in _CLUSTER_SCOPED:
            resource["metadata"]["namespace"] = namespace


def _add_labels(resources: Iterable[Resource], entry: Mapping[str, Any]) -> None:
    unsupported = set(entry) - _SUPPORTED_LABEL_FIELDS
    if unsupported or entry.get("includeSelectors", False):
        raise KustomizeError(f"labels: unsupported settings {sorted(entry)}")
    pairs: Mapping[str, str] = entry["pairs"]
    for resource in resources:
        resource["metadata"].setdefault("labels", {}).update(pairs)
        if not entry.get("includeTemplates", False):
            continue
        for path in _TEMPLATE_LABEL_PATHS.get(resource["kind"], ()):
            node = resource
            for part in path:
                node = node.setdefault(part, {})
            node.update(pairs)


@dataclass(frozen=True)
class ImageReference:
    """An image reference split into name, tag and digest."""

    name: str
    tag: str | None = None
    digest: str | None = None

    @classmethod
    def parse(cls, reference: str) -> ImageReference:
        rest, _, digest = reference.partition("@")
        # A colon after the last slash starts the tag; before it, it is a registry port.
        slash = rest.rfind("/")
        colon = rest.rfind(":")
        if colon > slash:
            return cls(rest[:colon], rest[colon + 1 :], digest or None)
        return cls(rest, None, digest or None)

    def __str__(self) -> str:
        text = self.name
        if self.tag:
            text += f":{self.tag}"
        if self.digest:
            text += f"@{self.digest}"
        return text


def _set_image(resources: Iterable[Resource], entry: Mapping[str, str]) -> None:
    unsupported = set(entry) - {"name", "newName", "newTag", "digest"}
    if unsupported:
        raise KustomizeError(f"images: unsupported fields {sorted(unsupported)}")
    for resource in resources:
        for pod_spec in pod_specs(resource):
            for container in containers_of(pod_spec):
                image = ImageReference.parse(container["image"])
                if image.name != entry["name"]:
                    continue
                container["image"] = str(
                    ImageReference(
                        entry.get("newName", image.name),
                        None if "digest" in entry else entry.get("newTag", image.tag),
                        entry.get("digest", image.digest),
                    )
                )
