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
_STATUS = re.compile(r"Sent with status ([A-Z_]+)\.")
#: How a comment says the status is passed on from the peer that refused (CONTEXT_REJECTED).
_PASSED_ON = re.compile(r"Sent with the [\w ]+'s own code")


def _comments(proto: Path) -> dict[str, str]:
    """Each enum value's comment block, by name."""
    text = proto.read_text()
    lines = text.splitlines()
    comments = {}
    for match in _VALUE.finditer(text):
        row = text[: match.start()].count("\n")
        comment = []
        for line in reversed(lines[:row]):
            if not line.strip().startswith("//"):
                break
            comment.append(line)
        comments[match.group(1)] = "\n".join(reversed(comment))
    return comments


@pytest.mark.parametrize("service", SERVICES, ids=lambda s: s.package)
def test_each_reason_is_documented_with_an_example_error_info_of_its_domain(
    service: Service,
) -> None:
    for name, block in _comments(service.proto).items():
        if name == UNSPECIFIED:
            continue
        assert f'"reason": "{name}"' in block, f"{name} has no example ErrorInfo"
        assert f'"domain": "{service.domain}"' in block, f"{name}'s example is not {service.domain}"
        assert "Sent with status " in block, f"{name} does not say its status code"


# --- the status each raise site sends --------------------------------------------------------


@dataclass(frozen=True)
class RaiseSite:
    """A call that builds an error with a reason: the status it sends, or None when the status
    is a parameter of the enclosing function (passed on from a peer)."""

    reason: str
    status: str | None
    where: str


def _status_literal(node: ast.expr) -> str | None:
    """``X`` of ``grpc.StatusCode.X``."""
    if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)):
        return None
    return node.attr if node.value.attr == "StatusCode" else None


def _callee(node: ast.Call) -> str | None:
    func = node.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)


def _params(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    return [arg.arg for arg in function.args.args]


def _helpers(tree: ast.Module) -> dict[str, tuple[int, str]]:
    """Functions that send a fixed status with the reason they are given: name -> (position
    of the reason parameter, status)."""
    helpers = {}
    for function in tree.body:
        if not isinstance(function, ast.FunctionDef):
            continue
        params = _params(function)
        for call in (n for n in ast.walk(function) if isinstance(n, ast.Call)):
            status = _status_literal(call.args[0]) if call.args else None
            reasons = [a.id for a in call.args[1:2] if isinstance(a, ast.Name) and a.id in params]
            if status and reasons:
                helpers[function.name] = (params.index(reasons[0]), status)
    return helpers


def _loop_values(function: ast.AST) -> dict[str, list[ast.expr]]:
    """Names a ``for`` binds from a literal tuple of tuples: name -> the values it takes."""
    bound: dict[str, list[ast.expr]] = defaultdict(list)
    for loop in (n for n in ast.walk(function) if isinstance(n, ast.For)):
        if not (isinstance(loop.target, ast.Tuple) and isinstance(loop.iter, ast.Tuple | ast.List)):
            continue
        for row in loop.iter.elts:
            if isinstance(row, ast.Tuple) and len(row.elts) == len(loop.target.elts):
                for target, value in zip(loop.target.elts, row.elts, strict=True):
                    if isinstance(target, ast.Name):
                        bound[target.id].append(value)
    return bound


class _RaiseSites(ast.NodeVisitor):
    """The raise sites of one module: every call given a value of a reason enum."""

    def __init__(self, module: str, helpers: dict[str, tuple[int, str]]) -> None:
        self.module = module
        self.helpers = helpers  # local or imported names
        self.enums: set[str] = set()
        self.sites: list[RaiseSite] = []
        self.unread: list[str] = []
        self._functions: list[ast.FunctionDef | ast.AsyncFunctionDef] = []

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if (node.module or "").endswith(".error_reason_pb2"):
            self.enums |= {alias.asname or alias.name for alias in node.names}

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._functions.append(node)
        self.generic_visit(node)
        self._functions.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def _reasons(self, node: ast.expr) -> list[str]:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            return [node.attr] if node.value.id in self.enums else []
        if isinstance(node, ast.Name) and self._functions:
            values = _loop_values(self._functions[-1]).get(node.id, [])
            return [name for value in values for name in self._reasons(value)]
        return []

    def visit_Call(self, node: ast.Call) -> None:
        where = f"{self.module}:{node.lineno}"
        for position, arg in enumerate(node.args):
            for reason in self._reasons(arg):
                self._site(node, position, reason, where)
        self.generic_visit(node)

    def _site(self, node: ast.Call, position: int, reason: str, where: str) -> None:
        literal = next(filter(None, map(_status_literal, node.args)), None)
        helper = self.helpers.get(_callee(node) or "")
        first = node.args[0]
        params = _params(self._functions[-1]) if self._functions else []
        if literal is not None:
            self.sites.append(RaiseSite(reason, literal, where))
        elif helper is not None and helper[0] == position:
            self.sites.append(RaiseSite(reason, helper[1], where))
        elif isinstance(first, ast.Name) and first.id in params and position == 1:
            self.sites.append(RaiseSite(reason, None, where))
        else:
            self.unread.append(f"{where} ({reason})")


@pytest.fixture(scope="module")
def raise_sites() -> tuple[list[RaiseSite], list[str]]:
    trees = {
        module: tree
        for root in (CORE, *(service.source for service in SERVICES))
        for module, tree in _modules(root)
    }
    helpers = {module: _helpers(tree) for module, tree in trees.items()}
    sites, unread = [], []
    for module, tree in trees.items():
        names = dict(helpers[module])
        for node in (n for n in tree.body if isinstance(n, ast.ImportFrom)):
            for alias in node.names:
                if alias.name in helpers.get(node.module or "", {}):
                    names[alias.asname or alias.name] = helpers[node.module or ""][alias.name]
        scan = _RaiseSites(module, names)
        scan.visit(tree)
        sites += scan.sites
        unread += scan.unread
    return sites, unread


def _stated(proto: Path) -> dict[str, str | None]:
    """The status each value's comment states; None for one passed on from a peer."""
    stated: dict[str, str | None] = {}
    for name, block in _comments(proto).items():
        status = _STATUS.search(block)
        stated[name] = None if _PASSED_ON.search(block) else status[1] if status else ""
    return stated


def test_every_raise_site_sends_the_status_its_reason_states(
    raise_sites: tuple[list[RaiseSite], list[str]],
) -> None:
    sites, unread = raise_sites
    assert not unread, (
        f"raise sites whose status this test cannot read: {unread}; pass grpc.StatusCode.X "
        "beside the reason, or through a helper that does"
    )
    shared = _stated(REPO / "protos/nemo/type/v1/error_reason.proto")
    wrong = []
    for site in sites:
        package = site.where.split(".")[0]
        services = [s for s in SERVICES if s.package == package] or list(SERVICES)
        for service in services:
            stated = {**shared, **_stated(service.proto)}
            if site.reason in stated and site.status != stated[site.reason]:
                wrong.append(
                    f"{site.where}: {site.reason} is sent with {site.status or 'a peer status'}"
                    f", but {service.proto.relative_to(REPO)} states {stated[site.reason]}"
                )
    assert not wrong, "\n".join(wrong)
    assert len({site.reason for site in sites}) > 50, "the scan reads the raise sites"


@pytest.mark.parametrize("service", SERVICES, ids=lambda s: s.package)
def test_every_reason_a_server_sends_has_a_raise_site_the_status_check_reads(
    service: Service,
    scans: dict[str, _Scan],
    imports: grimp.ImportGraph,
    raise_sites: tuple[list[RaiseSite], list[str]],
) -> None:
    read = {site.reason for site in raise_sites[0]}
    unchecked = sorted(set(_sent(service, scans, imports)) - read)
    assert not unchecked, f"{service.package} sends {unchecked} from no raise site read here"
