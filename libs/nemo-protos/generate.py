"""Generate the Python stubs of every contract under protos/ into this package.

Run through `make generate`. The drift test runs it into a temporary directory and compares, so
the committed stubs can never fall behind the protos.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from importlib import resources
from pathlib import Path

from grpc_tools import protoc

PACKAGE_ROOT = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_ROOT.parent.parent
PROTO_ROOT = REPO_ROOT / "protos"
DEFAULT_OUT = PACKAGE_ROOT / "src"
GENERATED_TOP = "nemo"


def generate(out_dir: Path, proto_root: Path = PROTO_ROOT) -> list[Path]:
    """Write the generated modules for all protos under proto_root into out_dir/nemo."""
    target = out_dir / GENERATED_TOP
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    protos = sorted(str(p.relative_to(proto_root)) for p in proto_root.rglob("*.proto"))
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
    for stub in target.rglob("*_pb2_grpc.py*"):
        if "Stub" not in stub.read_text():
            stub.unlink()
    # Regular packages (not namespace packages) so type checkers and wheels see every module.
    for directory in [target, *(d for d in target.rglob("*") if d.is_dir())]:
        (directory / "__init__.py").touch()
    (target / "py.typed").touch()
    return sorted(p for p in target.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output root directory")
    files = generate(parser.parse_args().out)
    print(f"generated {len(files)} files", file=sys.stderr)


if __name__ == "__main__":
    main()
