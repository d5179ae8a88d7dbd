"""Every ErrorInfo reason a server can send is a value of its service's proto enum, and every value
of that enum is one it can send.

The reasons are read from the source, not from a list kept beside it. The only place an error for
a caller is built (``ServiceError(...)``) is ``nemo_core.errors.ErrorFactory``, bound once per
service to its generated ``ErrorReason`` (and once to ``nemo.type.v1.ErrorReason`` for the shared
reasons) and typed to take a value of that enum. So the reasons a service can send are the
``ErrorReason.X`` its own modules name, plus the shared ones named by the nemo-core modules it
imports (a service that never imports the database helpers never sends DATABASE_UNAVAILABLE).
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import grimp
import pytest
from google.protobuf import descriptor_pb2

from nemo_context.app import SERVICE_NAME as CONTEXT_DOMAIN
from nemo_gateway.app import SERVICE_NAME as GATEWAY_DOMAIN
from nemo_protos.context.v1 import error_reason_pb2 as context_reasons
from nemo_protos.gateway.v1 import error_reason_pb2 as gateway_reasons
from nemo_protos.toolplane.v1 import error_reason_pb2 as toolplane_reasons
from nemo_protos.type.v1 import error_reason_pb2 as shared_reasons
from nemo_toolplane.app import SERVICE_NAME as TOOLPLANE_DOMAIN

if TYPE_CHECKING:
    from google.protobuf.internal.enum_type_wrapper import _EnumTypeWrapper

    Enum: TypeAlias = _EnumTypeWrapper[Any]

REPO = Path(__file__).resolve().parents[2]
SHARED = "nemo_protos.type.v1.error_reason_pb2"
UNSPECIFIED = "ERROR_REASON_UNSPECIFIED"


@dataclass(frozen=True)
class Service:
    package: str
    source: Path
    enum_module: str
    enum: Enum
    proto: Path
    domain: str


SERVICES = (
    Service(
        "nemo_context",
        REPO / "services/context/src",
        "nemo_protos.context.v1.error_reason_pb2",
        context_reasons.ErrorReason,
        REPO / "protos/nemo/context/v1/error_reason.proto",
        CONTEXT_DOMAIN,
    ),
    Service(
        "nemo_gateway",
        REPO / "services/gateway/src",
        "nemo_protos.gateway.v1.error_reason_pb2",
        gateway_reasons.ErrorReason,
        REPO / "protos/nemo/gateway/v1/error_reason.proto",
        GATEWAY_DOMAIN,
    ),
    Service(
        "nemo_toolplane",
        REPO / "services/toolplane/src",
        "nemo_protos.toolplane.v1.error_reason_pb2",
        toolplane_reasons.ErrorReason,
        REPO / "protos/nemo/toolplane/v1/error_reason.proto",
        TOOLPLANE_DOMAIN,
    ),
)
CORE = REPO / "libs/nemo-core/src"
#: The one function that builds a ServiceError: it takes a value of the enum it is bound to.
BUILDER = ("nemo_core.errors", "__call__")
#: Where each server binds its factory to its enum (``ErrorFactory(ErrorReason)``).
BINDINGS = {
    "nemo_core.errors": SHARED,
    **{f"{s.package}.errors": s.enum_module for s in SERVICES},
}
#: Attributes of a generated enum that turn names and numbers into each other: used on an enum
#: whose values a module may send, they could hide a reason from this scan.
ENUM_METHODS = frozenset({"Name", "Value", "keys", "values", "items", "DESCRIPTOR"})


@dataclass(frozen=True)
class Reference:
    module: str
    enum_module: str
    name: str
    line: int


@dataclass(frozen=True)
class Construction:
    module: str
    function: str | None
    line: int


def _modules(root: Path) -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield name, ast.parse(path.read_text(), str(path))


def _sendable(module: str) -> frozenset[str]:
    """The enums whose values ``module`` could send: its service's and the shared one."""
    own = {s.enum_module for s in SERVICES if module.split(".")[0] == s.package}
    return frozenset({*own, SHARED})


class _Scan(ast.NodeVisitor):
    """Names of ErrorReason values referenced, and ServiceError constructions, in one module."""

    def __init__(self, module: str) -> None:
        self.module = module
        self.sendable = _sendable(module)
        self.enums: dict[str, str] = {}  # local name -> generated module
        self.references: list[Reference] = []
        self.constructions: list[Construction] = []
        self.other_uses: list[str] = []
        self.bindings: list[str] = []
        self._function: list[str] = []

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        for alias in node.names:
            if module.endswith(".error_reason_pb2") and alias.name == "ErrorReason":
                self.enums[alias.asname or alias.name] = module
            elif alias.name == "error_reason_pb2" or module.endswith("error_reason_pb2"):
                # The whole module, or a value imported by itself: not a form this scan reads.
                self.other_uses.append(f"{self.module}:{node.lineno} imports {alias.name}")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.endswith("error_reason_pb2"):
                self.other_uses.append(f"{self.module}:{node.lineno} imports {alias.name}")

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._function.append(node.name)
        self.generic_visit(node)
        self._function.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.value, ast.Name) and node.value.id in self.enums:
            enum_module = self.enums[node.value.id]
            if node.attr in ENUM_METHODS:
                if enum_module in self.sendable:
                    self.other_uses.append(f"{self.module}:{node.lineno} uses .{node.attr}")
            elif node.attr != "ValueType":
                self.references.append(Reference(self.module, enum_module, node.attr, node.lineno))
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        # The enum passed around as a value (getattr, a dict of reasons...) would hide names.
        parent_is_attribute = getattr(node, "_attribute_value", False)
        sendable = self.enums.get(node.id) in self.sendable
        if sendable and not parent_is_attribute and isinstance(node.ctx, ast.Load):
            self.other_uses.append(f"{self.module}:{node.lineno} passes {node.id} as a value")

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if name == "ServiceError":
            function = self._function[-1] if self._function else None
            self.constructions.append(Construction(self.module, function, node.lineno))
        if name == "ErrorFactory":
            # The binding of a factory to its enum: the one place the enum is passed as a value.
            bound = [arg for arg in node.args if isinstance(arg, ast.Name) and arg.id in self.enums]
            self.bindings.extend(self.enums[arg.id] for arg in bound)
            for arg in bound:
                arg._attribute_value = True  # type: ignore[attr-defined]
        self.generic_visit(node)

    def generic_visit(self, node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(node, ast.Attribute) and child is node.value:
                child._attribute_value = True  # type: ignore[attr-defined]
            self.visit(child)


def _scan(root: Path) -> dict[str, _Scan]:
    scans = {}
    for module, tree in _modules(root):
        scan = _Scan(module)
        scan.visit(tree)
        scans[module] = scan
    return scans


@pytest.fixture(scope="module")
def scans() -> dict[str, _Scan]:
    found: dict[str, _Scan] = {}
    for root in (CORE, *(service.source for service in SERVICES), REPO / "ops/src"):
        found.update(_scan(root))
    return found


@pytest.fixture(scope="module")
def imports() -> grimp.ImportGraph:
    return grimp.build_graph(*(service.package for service in SERVICES), "nemo_core")


def _values(enum: Enum) -> dict[str, int]:
    return {name: number for name, number in enum.items() if name != UNSPECIFIED}


def _sent(
    service: Service, scans: dict[str, _Scan], imports: grimp.ImportGraph
) -> dict[str, list[str]]:
    """Reason -> where the service (or the shared code it runs) names it."""
    reachable = imports.find_upstream_modules(service.package, as_package=True)
    sent: dict[str, list[str]] = defaultdict(list)
    for module, scan in scans.items():
        own = module.split(".")[0] == service.package
        shared = module.startswith("nemo_core") and module in reachable
        for reference in scan.references:
            if (own and reference.enum_module in (service.enum_module, SHARED)) or (
                shared and reference.enum_module == SHARED
            ):
                sent[reference.name].append(f"{module}:{reference.line}")
    return sent


def test_errors_are_built_only_by_the_factory_bound_to_each_servers_enum(
    scans: dict[str, _Scan],
) -> None:
    constructions = [c for scan in scans.values() for c in scan.constructions]
    outside = [
        f"{c.module}:{c.line} (in {c.function})"
        for c in constructions
        if (c.module, c.function) != BUILDER
    ]
    assert not outside, f"ServiceError built outside ErrorFactory: {outside}"
    assert constructions, "the factory builds ServiceError (the check above is not vacuous)"
    bindings = {module: scan.bindings for module, scan in scans.items() if scan.bindings}
    assert bindings == {module: [enum] for module, enum in BINDINGS.items()}


def test_reasons_are_named_only_as_enum_values(scans: dict[str, _Scan]) -> None:
    others = [use for scan in scans.values() for use in scan.other_uses]
    assert not others, f"ErrorReason used in a way the reasons scan cannot read: {others}"


@pytest.mark.parametrize("service", SERVICES, ids=lambda s: s.package)
def test_every_reason_a_server_sends_is_a_value_of_its_enum_and_the_reverse(
    service: Service, scans: dict[str, _Scan], imports: grimp.ImportGraph
) -> None:
    sent = _sent(service, scans, imports)
    declared = _values(service.enum)
    undeclared = {name: where for name, where in sent.items() if name not in declared}
    assert not undeclared, f"{service.package} sends reasons its enum lacks: {undeclared}"
    unsent = sorted(set(declared) - set(sent))
    assert not unsent, (
        f"{service.enum_module} declares reasons {service.package} never sends: {unsent} "
        "(remove them, or reserve their numbers and names)"
    )


@pytest.mark.parametrize("service", SERVICES, ids=lambda s: s.package)
def test_a_service_enum_repeats_the_shared_reasons_under_their_numbers(service: Service) -> None:
    shared = _values(shared_reasons.ErrorReason)
    own = _values(service.enum)
    repeated = {name: own[name] for name in shared if name in own}
    assert repeated == {name: shared[name] for name in repeated}
    # A shared reason missing from the enum is reserved there, name and number.
    reserved = descriptor_pb2.EnumDescriptorProto()
    service.enum.DESCRIPTOR.CopyToProto(reserved)
    missing = set(shared) - set(own)
    assert missing == set(reserved.reserved_name) & set(shared)
    reserved_numbers = {
        number for span in reserved.reserved_range for number in range(span.start, span.end + 1)
    }
    assert {shared[name] for name in missing} <= reserved_numbers
    # The service's own reasons stay clear of the numbers kept for shared ones.
    assert all(number >= 100 for name, number in own.items() if name not in shared)


def test_every_shared_reason_is_sent_by_the_shared_code(scans: dict[str, _Scan]) -> None:
    named = {
        reference.name
        for module, scan in scans.items()
        if module.startswith("nemo_core")
        for reference in scan.references
        if reference.enum_module == SHARED
    }
    assert named == set(_values(shared_reasons.ErrorReason))


_VALUE = re.compile(r"^\s*([A-Z][A-Z0-9_]*) = (\d+);", re.MULTILINE)


@pytest.mark.parametrize("service", SERVICES, ids=lambda s: s.package)
def test_each_reason_is_documented_with_an_example_error_info_of_its_domain(
    service: Service,
) -> None:
    text = service.proto.read_text()
    lines = text.splitlines()
    for match in _VALUE.finditer(text):
        name = match.group(1)
        if name == UNSPECIFIED:
            continue
        row = text[: match.start()].count("\n")
        comment = []
        for line in reversed(lines[:row]):
            if not line.strip().startswith("//"):
                break
            comment.append(line)
        block = "\n".join(reversed(comment))
        assert f'"reason": "{name}"' in block, f"{name} has no example ErrorInfo"
        assert f'"domain": "{service.domain}"' in block, f"{name}'s example is not {service.domain}"
        assert "Sent with status " in block, f"{name} does not say its status code"
