"""Mutants of one source file: small, plausible bugs, each named so that the name survives
unrelated edits.

A mutant's id is ``<file>::<scope>::<operator>: <before> -> <after>`` (``#n`` appended when the
same change occurs more than once in a scope). The scope is the enclosing class and function,
or, at module level, the assigned name, narrowed by the key of a dict literal (``TABLE[key]``)
and by the first argument of a constructor call in a table (``RULES/Rule(4)``). Line numbers
are printed beside the id, never part of it.

The operators, one mutant per site:

- ``number``: ``n`` becomes ``n + 1``;
- ``string``: a string (an f-string too) becomes ``""``, and ``""`` becomes ``"XX"``: a word
  gone from a table, a message that says nothing, a pattern that matches everywhere;
- ``bool``: ``True`` and ``False`` swap;
- ``compare``: ``==``/``!=``, ``<``/``<=``, ``>``/``>=``, ``in``/``not in``, ``is``/``is not``;
- ``boolean``: ``and``/``or``;
- ``not``: ``not x`` becomes ``x``; ``-x`` becomes ``x``;
- ``arithmetic``: ``+``/``-``, ``*`` to ``/``, ``/`` to ``*``, ``//`` to ``/``, ``%`` to ``/``,
  ``**`` to ``*``, ``|``/``&``, ``^`` to ``&``, ``<<``/``>>`` (also in augmented assignments);
- ``condition``: the test of an ``if``, ``while``, conditional expression or comprehension
  filter that is neither a comparison nor a ``not`` (those have their own operators) is negated;
- ``loop``: ``break``/``continue``;
- ``call``: a call made for its effect (a statement of its own) is removed.

Never mutated, because no mutant there can change what the program does: docstrings and other
string statements, annotations (of arguments, returns and variables) and type expressions
elsewhere (``Literal[...]``, ``TypeVar(...)``), ``__all__`` and imports.
"""

from __future__ import annotations

import ast
import copy
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import cast

_COMPARE: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_ARITHMETIC: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div,
    ast.Mod: ast.Div,
    ast.Pow: ast.Mult,
    ast.BitOr: ast.BitAnd,
    ast.BitAnd: ast.BitOr,
    ast.BitXor: ast.BitAnd,
    ast.LShift: ast.RShift,
    ast.RShift: ast.LShift,
}
_TYPE_FORMS = frozenset({"Literal", "Final", "ClassVar", "Annotated", "TypeVar", "NewType"})
_NOT_CODE = frozenset({"annotation", "returns", "type_comment", "ctx", "op", "ops", "format_spec"})
"""Fields whose content no mutant can change the behaviour of, or that an operator mutates."""
_SHOWN = 60
"""Longest rendering of the code before and after, in an id."""

Step = tuple[str, int | None]
"""One step from a node to a child: the field name and, for list fields, the index."""
Change = Callable[[ast.AST], ast.AST | None]
"""The mutated node from (a copy of) the original one; None removes a statement."""


@dataclass(frozen=True)
class Mutant:
    """One mutant of one file."""

    id: str
    path: str
    """The file, relative to the repository root."""
    scope: str
    line: int
    operator: str
    before: str
    after: str
    location: tuple[Step, ...]
    """Where the mutated node is in the module's tree."""
    change: Change
    lines: tuple[int, int]
    """The lines whose execution means the mutant's code ran (its statement, or the header of
    a compound statement)."""

    def tree(self, module: ast.Module) -> ast.Module:
        """``module`` (parsed from the file) with this mutant applied."""
        mutated = copy.deepcopy(module)
        parent: ast.AST = mutated
        for field, index in self.location[:-1]:
            child = getattr(parent, field)
            parent = child[index] if index is not None else child
        field, index = self.location[-1]
        if index is None:
            setattr(parent, field, self.change(getattr(parent, field)))
        else:
            siblings = getattr(parent, field)
            replacement = self.change(siblings[index])
            siblings[index] = replacement if replacement is not None else ast.Pass()
        return ast.fix_missing_locations(mutated)


# The changes each operator makes.


def _negated(node: ast.AST) -> ast.AST:
    return ast.UnaryOp(op=ast.Not(), operand=cast(ast.expr, node))


def _emptied(node: ast.AST) -> ast.AST:
    value = node.value if isinstance(node, ast.Constant) else "f-string"
    if isinstance(value, bytes):
        return ast.Constant(b"" if value else b"XX")
    return ast.Constant("" if value else "XX")


def _flipped(node: ast.AST) -> ast.AST:
    return ast.Constant(not cast(ast.Constant, node).value)


def _incremented(node: ast.AST) -> ast.AST:
    value = cast(ast.Constant, node).value
    return ast.Constant(cast(int | float, value) + 1)


def _operand(node: ast.AST) -> ast.AST:
    return cast(ast.UnaryOp, node).operand


def _removed(node: ast.AST) -> None:
    return None


def _compare(index: int, replacement: type[ast.cmpop]) -> Change:
    def change(node: ast.AST) -> ast.AST:
        compare = cast(ast.Compare, node)
        ops = [replacement() if i == index else op for i, op in enumerate(compare.ops)]
        return ast.Compare(compare.left, ops, compare.comparators)

    return change


def _boolean(node: ast.AST) -> ast.AST:
    boolean = cast(ast.BoolOp, node)
    return ast.BoolOp(ast.Or() if isinstance(boolean.op, ast.And) else ast.And(), boolean.values)


def _arithmetic(node: ast.AST) -> ast.AST:
    if isinstance(node, ast.BinOp):
        return ast.BinOp(node.left, _ARITHMETIC[type(node.op)](), node.right)
    augmented = cast(ast.AugAssign, node)
    return ast.AugAssign(augmented.target, _ARITHMETIC[type(augmented.op)](), augmented.value)


def _loop(node: ast.AST) -> ast.AST:
    return ast.Continue() if isinstance(node, ast.Break) else ast.Break()


def _operators(node: ast.AST) -> Iterator[tuple[str, Change]]:  # noqa: C901 - one per kind
    """The mutations of ``node`` itself (its children have their own)."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool):
            yield "bool", _flipped
        elif isinstance(node.value, int | float):
            yield "number", _incremented
        elif isinstance(node.value, str | bytes):
            yield "string", _emptied
    elif isinstance(node, ast.JoinedStr):
        yield "string", _emptied
    elif isinstance(node, ast.Compare):
        for index, op in enumerate(node.ops):
            yield "compare", _compare(index, _COMPARE[type(op)])
    elif isinstance(node, ast.BoolOp):
        yield "boolean", _boolean
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not | ast.USub):
        yield "not", _operand
    elif isinstance(node, ast.BinOp | ast.AugAssign) and type(node.op) in _ARITHMETIC:
        yield "arithmetic", _arithmetic
    elif isinstance(node, ast.Break | ast.Continue):
        yield "loop", _loop
    elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call | ast.Await):
        yield "call", _removed


def _is_condition(test: ast.AST) -> bool:
    """A test that only the ``condition`` operator mutates (comparisons and ``not`` have theirs)."""
    return not isinstance(test, ast.Compare) and not (
        isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    )


def _conditions(node: ast.AST) -> Iterator[tuple[str, int | None]]:
    """The fields of ``node`` that hold a condition."""
    if isinstance(node, ast.If | ast.While | ast.IfExp) and _is_condition(node.test):
        yield "test", None
    elif isinstance(node, ast.comprehension):
        yield from (("ifs", i) for i, test in enumerate(node.ifs) if _is_condition(test))


def _never_mutated(node: ast.AST) -> bool:
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return True  # a docstring or another string statement
    if isinstance(node, ast.Import | ast.ImportFrom):
        return True
    if isinstance(node, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
    ):
        return True
    head = node.value if isinstance(node, ast.Subscript) else getattr(node, "func", None)
    name = getattr(head, "id", None) or getattr(head, "attr", None)
    return isinstance(node, ast.Subscript | ast.Call) and name in _TYPE_FORMS


# Where a node is: its scope, its place in the tree and the lines of its statement.


@dataclass(frozen=True)
class _Here:
    scope: str
    location: tuple[Step, ...]
    lines: tuple[int, int]
    table: bool = False
    """Inside the value of a module-level assignment, where calls of constructors are rows."""
    label: str = ""
    """The keyword a value is passed as."""

    def down(self, field: str, index: int | None = None, **changes: object) -> _Here:
        return replace(self, location=(*self.location, (field, index)), label="", **changes)  # type: ignore[arg-type]


@dataclass(frozen=True)
class _Site:
    here: _Here
    operator: str
    line: int
    before: str
    after: str
    change: Change


def _shown(node: ast.AST | None, label: str) -> str:
    text = "(removed)" if node is None else " ".join(ast.unparse(node).split())
    text = f"{label}={text}" if label else text
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def _statement_lines(node: ast.stmt) -> tuple[int, int]:
    """A simple statement's lines, or the header of a compound one (decorators included)."""
    body = getattr(node, "body", None)
    if not (isinstance(body, list) and body and isinstance(body[0], ast.stmt)):
        return (node.lineno, node.end_lineno or node.lineno)
    decorators = [d.lineno for d in getattr(node, "decorator_list", ())]
    return (min([node.lineno, *decorators]), max(node.lineno, body[0].lineno - 1))


class _Walker:
    """Visits every node a mutant may change, knowing its scope (see the module docstring)."""

    def __init__(self) -> None:
        self.sites: list[_Site] = []
        self.classes: set[str] = set()

    def visit(self, node: ast.AST, here: _Here) -> None:
        if _never_mutated(node):
            return
        if isinstance(node, ast.stmt):
            here = replace(here, lines=_statement_lines(node))
        here = self._narrowed(node, here)
        for operator, change in _operators(node):
            self._site(node, here, operator, change)
        for field, index in _conditions(node):
            test = getattr(node, field) if index is None else getattr(node, field)[index]
            self._site(test, here.down(field, index), "condition", _negated)
        if isinstance(node, ast.JoinedStr):
            self._formatted(node, here)
            return
        inner = self._inner(node, here)
        for field, value in ast.iter_fields(node):
            if field in _NOT_CODE:
                continue
            if isinstance(value, ast.AST):
                self.visit(value, self._child(node, field, None, inner, here))
            elif isinstance(value, list):
                for index, item in enumerate(value):
                    if isinstance(item, ast.AST):
                        self.visit(item, self._child(node, field, index, inner, here))

    def _formatted(self, node: ast.JoinedStr, here: _Here) -> None:
        """Only the expressions of an f-string: its text is one string, emptied as a whole."""
        for index, part in enumerate(node.values):
            if isinstance(part, ast.FormattedValue):
                self.visit(part.value, here.down("values", index).down("value"))

    def _site(self, node: ast.AST, here: _Here, operator: str, change: Change) -> None:
        mutated = change(copy.deepcopy(node))
        line = getattr(node, "lineno", here.lines[0])
        before, after = _shown(node, here.label), _shown(mutated, here.label)
        self.sites.append(_Site(here, operator, line, before, after, change))

    def _narrowed(self, node: ast.AST, here: _Here) -> _Here:
        """A table row (a constructor call with a constant or named first argument, inside a
        module-level value) narrows the scope to itself: ``RULES/Rule(4)``."""
        if not (here.table and isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            return here
        first = node.args[0] if node.args else None
        if not node.func.id[:1].isupper() or not isinstance(
            first, ast.Constant | ast.Name | ast.Attribute
        ):
            return here
        shown = str(first.value) if isinstance(first, ast.Constant) else ast.unparse(first)
        return replace(here, scope=f"{here.scope}/{node.func.id}({shown})")

    def _inner(self, node: ast.AST, here: _Here) -> str:
        """The scope of what a definition or an assignment holds."""
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            inner = node.name if here.scope == "<module>" else f"{here.scope}.{node.name}"
            if isinstance(node, ast.ClassDef):
                self.classes.add(inner)
            return inner
        if isinstance(node, ast.Assign | ast.AnnAssign):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if isinstance(target, ast.Name) and here.scope == "<module>":
                return target.id
            if isinstance(target, ast.Name) and here.scope in self.classes:
                return f"{here.scope}.{target.id}"
        return here.scope

    def _child(
        self, node: ast.AST, field: str, index: int | None, inner: str, here: _Here
    ) -> _Here:
        child = here.down(field, index, scope=inner)
        if isinstance(node, ast.Assign | ast.AnnAssign) and here.scope == "<module>":
            child = replace(child, table=True)
        if isinstance(node, ast.keyword):
            child = replace(child, label=node.arg or "**")
        if isinstance(node, ast.Dict) and field == "values" and index is not None:
            key = node.keys[index]
            if key is not None:
                shown = str(key.value) if isinstance(key, ast.Constant) else ast.unparse(key)
                child = replace(child, scope=f"{here.scope}[{shown}]")
        return child


def mutants_of(root: Path, path: str) -> Iterator[Mutant]:
    """Every mutant of the file ``path`` (relative to ``root``), in source order."""
    tree = ast.parse((root / path).read_text(encoding="utf-8"), filename=path)
    walker = _Walker()
    walker.visit(tree, _Here("<module>", (), (1, 1)))
    names = [
        f"{path}::{site.here.scope}::{site.operator}: {site.before} -> {site.after}"
        for site in walker.sites
    ]
    totals = Counter(names)
    seen: Counter[str] = Counter()
    for name, site in zip(names, walker.sites, strict=True):
        seen[name] += 1
        yield Mutant(
            id=f"{name} #{seen[name]}" if totals[name] > 1 else name,
            path=path,
            scope=site.here.scope,
            line=site.line,
            operator=site.operator,
            before=site.before,
            after=site.after,
            location=site.here.location,
            change=site.change,
            lines=site.here.lines,
        )
