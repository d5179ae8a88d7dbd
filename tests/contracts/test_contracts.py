"""The contracts: generated stubs match the protos, buf lint and buf breaking pass, stubs ship."""

from __future__ import annotations

import filecmp
import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from importlib import resources
from pathlib import Path
from types import ModuleType

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PROTOS_PACKAGE = REPO_ROOT / "libs" / "nemo-protos"
GENERATED = PROTOS_PACKAGE / "src" / "nemo_protos"


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "nemo_protos_generate", PROTOS_PACKAGE / "generate.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tree(root: Path) -> set[str]:
    return {
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_generated_code_is_up_to_date(tmp_path: Path) -> None:
    _load_generator().generate(tmp_path)
    fresh = tmp_path / "nemo_protos"
    assert _tree(fresh) == _tree(GENERATED), (
        "run `make generate`: the set of generated files differs"
    )
    stale = [
        name
        for name in sorted(_tree(fresh))
        if not filecmp.cmp(fresh / name, GENERATED / name, shallow=False)
    ]
    assert not stale, f"run `make generate`: stale generated files {stale}"


def test_drift_check_notices_a_changed_proto(tmp_path: Path) -> None:
    """The comparison above really depends on the proto text (guards against a vacuous check)."""
    generator = _load_generator()
    protos_copy = tmp_path / "protos"
    shutil.copytree(REPO_ROOT / "protos", protos_copy)
    locale = protos_copy / "nemo" / "type" / "v1" / "locale.proto"
    locale.write_text(
        locale.read_text().replace(
            "LOCALE_EN = 2;", "LOCALE_EN = 2;\n  // French.\n  LOCALE_FR = 3;"
        )
    )
    generator.generate(tmp_path / "out", proto_root=protos_copy)
    changed = tmp_path / "out" / "nemo_protos" / "type" / "v1" / "locale_pb2.py"
    assert not filecmp.cmp(changed, GENERATED / "type" / "v1" / "locale_pb2.py", shallow=False)


def test_the_vendored_googleapis_protos_are_the_installed_packages() -> None:
    """protos/google holds googleapis' own files so that buf and protoc resolve imports offline;
    the generated code imports their modules from googleapis-common-protos, which must be the
    same text."""
    vendored = REPO_ROOT / "protos" / "google"
    files = sorted(p.relative_to(vendored.parent) for p in vendored.rglob("*.proto"))
    assert files
    for relative in files:
        installed = resources.files(".".join(relative.parts[:-1])) / relative.name
        assert (vendored.parent / relative).read_text() == installed.read_text(), relative


def _buf(*args: str) -> subprocess.CompletedProcess[str]:
    buf = shutil.which("buf", path=str(Path(sys.executable).parent))
    assert buf, "buf (buf-bin) is not installed in the environment"
    return subprocess.run([buf, *args], cwd=REPO_ROOT, capture_output=True, text=True, check=False)


def test_buf_lint_passes() -> None:
    result = _buf("lint")
    assert result.returncode == 0, result.stdout + result.stderr


def test_buf_breaking_against_main() -> None:
    has_main = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", "main"],
        cwd=REPO_ROOT,
        capture_output=True,
        check=False,
    )
    if has_main.returncode != 0:
        pytest.fail("no `main` branch to compare the contracts against")
    result = _buf("breaking", "--against", ".git#branch=main")
    assert result.returncode == 0, result.stdout + result.stderr


def test_buf_breaking_detects_a_removed_field(tmp_path: Path) -> None:
    """buf breaking is wired to the FILE rules: removing a field fails against the current tree."""
    work = tmp_path / "tree"
    shutil.copytree(REPO_ROOT / "protos", work / "protos")
    shutil.copy(REPO_ROOT / "buf.yaml", work / "buf.yaml")
    request = work / "protos" / "nemo" / "context" / "v1" / "context_service.proto"
    text = request.read_text()
    field = "  bool persist = 3 [(google.api.field_behavior) = OPTIONAL];\n"
    assert field in text
    request.write_text(text.replace(field, ""))
    buf = shutil.which("buf", path=str(Path(sys.executable).parent))
    assert buf
    result = subprocess.run(
        [buf, "breaking", "--against", str(REPO_ROOT)],
        cwd=work,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "persist" in result.stdout + result.stderr


def _uv() -> str:
    """The uv running this suite (`uv run` exports its own path as UV), else the one the
    Makefile installs under .tools/, else one on PATH."""
    search = os.pathsep.join([str(REPO_ROOT / ".tools" / "bin"), os.environ.get("PATH", "")])
    uv = os.environ.get("UV") or shutil.which("uv", path=search)
    assert uv, "uv is required to build the stubs wheel: run the suite with `make test`"
    return uv


def test_stubs_build_as_an_installable_wheel(tmp_path: Path) -> None:
    uv = _uv()
    subprocess.run(
        [uv, "build", "--wheel", "--quiet", "--out-dir", str(tmp_path), str(PROTOS_PACKAGE)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("nemo_protos-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for expected in (
        "nemo_protos/py.typed",
        "nemo_protos/context/v1/context_service_pb2.py",
        "nemo_protos/context/v1/context_service_pb2_grpc.py",
        "nemo_protos/context/v1/context_service_pb2_grpc.pyi",
        "nemo_protos/gateway/v1/gateway_service_pb2_grpc.py",
        "nemo_protos/toolplane/v1/toolplane_service_pb2_grpc.py",
        "nemo_protos/toolplane/v1/toolplane_admin_service_pb2_grpc.py",
    ):
        assert expected in names
    # The bare top-level `nemo` belongs to NVIDIA's nemo-toolkit; the stubs never install there.
    assert not [name for name in names if name.startswith("nemo/")]


def _locked_packages(package: str) -> set[str]:
    exported = subprocess.run(
        [_uv(), "export", "--frozen", "--no-dev", "--no-hashes", "--package", package],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {
        line.split("==")[0].strip().lower()
        for line in exported.splitlines()
        if "==" in line and not line.lstrip().startswith("#")
    }


def test_only_the_services_with_a_database_ship_its_driver() -> None:
    driver = {"asyncpg", "opentelemetry-instrumentation-asyncpg"}
    assert not driver & _locked_packages("nemo-gateway")
    for package in ("nemo-context", "nemo-toolplane", "nemo-ops"):
        assert driver <= _locked_packages(package), package


def test_every_request_field_says_whether_it_is_required() -> None:
    """AIP-203: required-ness is a `google.api.field_behavior` annotation, not prose; every field
    of every method's request says REQUIRED or OPTIONAL."""
    from google.api import field_behavior_pb2

    from nemo_protos.context.v1 import context_service_pb2
    from nemo_protos.gateway.v1 import gateway_service_pb2
    from nemo_protos.toolplane.v1 import toolplane_admin_service_pb2, toolplane_service_pb2

    allowed = {field_behavior_pb2.REQUIRED, field_behavior_pb2.OPTIONAL}
    unmarked = []
    checked = 0
    for module in (
        context_service_pb2,
        gateway_service_pb2,
        toolplane_service_pb2,
        toolplane_admin_service_pb2,
    ):
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                for field in method.input_type.fields:
                    behavior = set(field.GetOptions().Extensions[field_behavior_pb2.field_behavior])
                    checked += 1
                    if len(behavior & allowed) != 1:
                        unmarked.append(field.full_name)
    assert checked > 40
    assert not unmarked, f"request fields without REQUIRED or OPTIONAL: {unmarked}"
