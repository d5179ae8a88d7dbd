"""Generate the Python stubs of every contract under protos/ into this package.

Run through `make generate`. The drift test runs it into a temporary directory and compares, so
the committed stubs can never fall behind the protos.

The proto packages are `nemo.<service>.v1`, but the Python package is `nemo_protos`: a bare
top-level `nemo` would collide with NVIDIA's `nemo-toolkit`. protoc derives Python import paths
from the .proto file paths, so the generated imports and module names are rewritten afterwards
(as temporalio does for `temporal.api`); the descriptors, and so the service full names and
reflection, keep the proto names.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from importlib import resources
from pathlib import Path

from grpc_tools import protoc

PACKAGE_ROOT = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_ROOT.parent.parent
PROTO_ROOT = REPO_ROOT / "protos"
DEFAULT_OUT = PACKAGE_ROOT / "src"
PROTO_TOP = "nemo"
GENERATED_TOP = "nemo_protos"
# `from nemo.context.v1 import ...` / `import nemo.context.v1...` at the start of a line, and the
# module name a _pb2 module registers its messages under; never the serialized descriptors.
_IMPORT = re.compile(rf"^(\s*)(from|import) {PROTO_TOP}\.", re.MULTILINE)
_MODULE_NAME = re.compile(rf"'{PROTO_TOP}\.([\w.]+_pb2)'")


def generate(out_dir: Path, proto_root: Path = PROTO_ROOT) -> list[Path]:
    """Write the generated modules for all protos under proto_root into out_dir/nemo_protos."""
    target = out_dir / GENERATED_TOP
    if target.exists():
        shutil.rmtree(target)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir) as scratch:
        _protoc(Path(scratch), proto_root)
        shutil.move(Path(scratch) / PROTO_TOP, target)
    for module in [*target.rglob("*.py"), *target.rglob("*.pyi")]:
        module.write_text(_rewrite(module.read_text()))
    # Regular packages (not namespace packages) so type checkers and wheels see every module.
    for directory in [target, *(d for d in target.rglob("*") if d.is_dir())]:
        (directory / "__init__.py").touch()
    (target / "py.typed").touch()
    return sorted(p for p in target.rglob("*") if p.is_file())


def _rewrite(source: str) -> str:
    source = _IMPORT.sub(rf"\1\2 {GENERATED_TOP}.", source)
    return _MODULE_NAME.sub(rf"'{GENERATED_TOP}.\1'", source)


def _protoc(out_dir: Path, proto_root: Path) -> None:
    # Only the project's contracts: protos/google holds googleapis' files for imports (their
    # modules come from googleapis-common-protos).
    protos = sorted(
        str(p.relative_to(proto_root)) for p in (proto_root / PROTO_TOP).rglob("*.proto")
    )
    well_known = str(resources.files("grpc_tools") / "_proto")
    plugin_dir = Path(sys.executable).parent
    args = [
        "grpc_tools.protoc",
        f"--proto_path={proto_root}",
        f"--proto_path={well_known}",
        f"--plugin=protoc-gen-mypy={plugin_dir / 'protoc-gen-mypy'}",
        f"--plugin=protoc-gen-mypy_grpc={plugin_dir / 'protoc-gen-mypy_grpc'}",
        f"--python_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        f"--mypy_out={out_dir}",
        f"--mypy_grpc_out={out_dir}",
        *protos,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    # grpc_python_out writes an empty module per message-only file; keep only real services.
    for stub in (out_dir / PROTO_TOP).rglob("*_pb2_grpc.py*"):
        if "Stub" not in stub.read_text():
            stub.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output root directory")
    files = generate(parser.parse_args().out)
    print(f"generated {len(files)} files", file=sys.stderr)


if __name__ == "__main__":
    main()
