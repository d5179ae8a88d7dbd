"""Reading the project's Markdown for the docs tests: its code, its prose, and what the names in
them must be (repository paths, test names, settings, commands)."""

from __future__ import annotations

import ast
import functools
import re
import subprocess
from collections.abc import Iterator
from fnmatch import fnmatchcase
from pathlib import Path

from nemo_core.secret_files import file_variable, secret_file_fields
from nemo_devtools import node
from nemo_ops.cli import SUBCOMMANDS
from nemo_ops.dev import dev_env
from nemo_ops.migrate import ROLE_PASSWORD_ENV
from nemo_ops.operator_credential import OPERATOR_TOKEN_ENV
from nemo_ops.service_processes import Ports
from nemo_ops.settings_doc import SERVICES as SETTINGS_CLASSES

REPO = Path(__file__).resolve().parents[2]

CODE_BLOCK = re.compile(r"^ *```[a-z]*\n(.*?)^ *```", re.S | re.M)
INLINE_CODE = re.compile(r"`([^`\n]+)`")
VARIABLE = re.compile(r"\bNEMO_[A-Z0-9_]*[A-Z0-9]\b")
NEMO_COMMAND = re.compile(r"(?:^|&& |uv run )nemo ([a-z][a-z-]*)")
MAKE_COMMAND = re.compile(r"(?:^|&& |\s)make ([a-z][a-z-]*)")
PYTHON_MODULE = re.compile(r"python -m ([a-z_][a-z0-9_.]*)")
#: A word naming a place in the repository, with an optional ``::symbol`` after a file.
PATH_WORD = re.compile(r"^(?P<path>[\w.<>*-]+(?:/[\w.<>*-]+)*/?)(?:::(?P<symbol>[\w.:]+))?$")
#: Files a relative path may name (``registry.py``, ``mcp/origins.py``).
SOURCE_SUFFIXES = (".py", ".proto", ".sql", ".md", ".toml", ".yaml", ".yml", ".sh", ".binpb")
#: Made by a run, never in the repository.
RUNTIME_PREFIXES = (".nemo/", ".tools/", ".venv/", "~/")
PLACEHOLDER = re.compile(r"<[^<>/]+>|NNNN")


def code(text: str) -> list[str]:
    """Code lines: those of fenced blocks, then inline code spans."""
    lines = [line.strip() for block in CODE_BLOCK.findall(text) for line in block.splitlines()]
    return lines + INLINE_CODE.findall(CODE_BLOCK.sub("", text))


def prose(text: str) -> str:
    """The text without its code blocks, inline code, link targets, and HTML comments with
    what a generator wrote between a ``begin`` and an ``end`` comment."""
    text = CODE_BLOCK.sub("", text)
    text = re.sub(r"<!-- (\w+):begin -->.*?<!-- \1:end -->", "", text, flags=re.S)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return INLINE_CODE.sub("", text)


@functools.cache
def repository_files() -> tuple[str, ...]:
    """Every file of the repository, tracked or new (not ignored), relative to its root."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    return tuple(path for path in listed.splitlines() if (REPO / path).exists())


@functools.cache
def _directories() -> frozenset[str]:
    return frozenset(str(parent) for path in repository_files() for parent in Path(path).parents)


def _pattern(path: str) -> str:
    return PLACEHOLDER.sub("*", path.rstrip("/"))


def matching_files(path: str) -> list[str]:
    """The repository's files (or, for a directory, the directory) ``path`` names: from the
    root when its first part is at the root, else as the end of a longer path. Placeholders
    (``<service>``, ``NNNN``) match any name."""
    pattern = _pattern(path)
    names = [*repository_files(), *_directories()]
    exact = [name for name in names if fnmatchcase(name, pattern)]
    if exact or pattern.split("/")[0] in _top_level():
        return exact
    return [name for name in names if fnmatchcase(name, f"*/{pattern}")]


@functools.cache
def _top_level() -> frozenset[str]:
    return frozenset(path.split("/")[0] for path in repository_files())


def named_paths(line: str) -> Iterator[tuple[str, str | None]]:
    """The repository paths (and ``::symbols``) a code line names: words whose first part is at
    the root of the repository, or that end in a source file's suffix."""
    for word in line.split():
        match = PATH_WORD.match(word.lstrip("('\"").rstrip(".,;:)'\""))
        if match is None or word.startswith(RUNTIME_PREFIXES) or "://" in word:
            continue
        path = match["path"]
        at_root = path.split("/")[0] in _top_level()
        if at_root or path.endswith(SOURCE_SUFFIXES):
            yield path, match["symbol"]


def defines(path: str, symbol: str) -> bool:
    """Whether the Python file defines ``symbol`` (``name``, ``Class.method`` or
    ``Class::method``) at its top level or in a class."""
    tree = ast.parse((REPO / path).read_text(encoding="utf-8"))
    wanted = symbol.replace("::", ".").split(".")
    scope: list[ast.stmt] = tree.body
    if len(wanted) == 1:  # a method may be cited by its name alone
        classes = [node for node in tree.body if isinstance(node, ast.ClassDef)]
        scope = scope + [statement for node in classes for statement in node.body]
    for part in wanted:
        found = next((node for node in scope if part in _names(node)), None)
        if found is None:
            return False
        scope = found.body if isinstance(found, ast.ClassDef) else []
    return True


def _names(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {target.id for target in node.targets if isinstance(target, ast.Name)}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    return set()


@functools.cache
def defined_test_names() -> frozenset[str]:
    """Every test function of the repository, by name."""
    names = set()
    for path in repository_files():
        if Path(path).name.startswith("test_") and path.endswith(".py"):
            tree = ast.parse((REPO / path).read_text(encoding="utf-8"))
            names |= {
                node.name
                for node in ast.walk(tree)
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                and node.name.startswith("test_")
            }
    return frozenset(names)


@functools.cache
def known_variables() -> frozenset[str]:
    """Every NEMO_ variable a settings class reads, every one the code and manifests name (tests
    left out: a removed setting a test still names is not known), and every one a test reads
    from the environment (a switch of the test, such as ``NEMO_UPDATE_GOLDEN``)."""
    known = {f"{v}{suffix}" for v in ROLE_PASSWORD_ENV.values() for suffix in ("", "_FILE")}
    known.add(OPERATOR_TOKEN_ENV)  # read by the `nemo` commands that act for a person
    known.add(node.CACHE_VARIABLE)  # where the pinned npm packages are installed
    # What `nemo dev up` writes to dev.env (and `nemo dev oauth-token` reads).
    known |= set(dev_env("", Ports(1, 2, 3, 4), {}, {}, oauth_issuer=""))
    for _, settings in SETTINGS_CLASSES:
        prefix = str(settings.model_config.get("env_prefix", ""))
        known |= {f"{prefix}{name.upper()}" for name in settings.model_fields}
        known |= {file_variable(settings, name) for name in secret_file_fields(settings)}
    return frozenset(known | _named_in_code() | _read_by_tests())


def variable_known(variable: str) -> bool:
    return variable in known_variables() or any(
        pattern.fullmatch(variable) for pattern in _built_in_code()
    )


def is_test_file(path: str) -> bool:
    """A test module, a test fixture module or anything under a ``tests`` directory."""
    parts = Path(path).parts
    return "tests" in parts[:-1] or parts[-1].startswith("test_") or parts[-1] == "conftest.py"


def _texts(*, tests: bool) -> Iterator[str]:
    """The code and manifests of the repository, or (``tests``) its tests."""
    for path in repository_files():
        if not path.endswith((".py", ".sh", ".yaml", ".yml", ".toml", "Makefile")):
            continue
        if is_test_file(path) is tests:
            yield (REPO / path).read_text(encoding="utf-8", errors="replace")


def _code_texts() -> Iterator[str]:
    return _texts(tests=False)


@functools.cache
def _named_in_code() -> frozenset[str]:
    return frozenset(name for text in _code_texts() for name in VARIABLE.findall(text))


_ENVIRONMENT_READ = re.compile(
    r"""(?:environ\.get\(|environ\[|getenv\()\s*["'](NEMO_[A-Z0-9_]*[A-Z0-9])["']"""
)


@functools.cache
def _read_by_tests() -> frozenset[str]:
    return frozenset(
        name for text in _texts(tests=True) for name in _ENVIRONMENT_READ.findall(text)
    )


@functools.cache
def _built_in_code() -> tuple[re.Pattern[str], ...]:
    """Names the code builds (``f"NEMO_DEV_TOKEN_{agent}_AGENT"``), as patterns."""
    built = {
        match
        for text in _code_texts()
        for match in re.findall(r"NEMO_[A-Z0-9_]*\{[^}]*\}[A-Z0-9_]*", text)
    }
    return tuple(
        re.compile(re.sub(r"\\\{[^}]*\\\}", "[A-Z0-9_]+", re.escape(name))) for name in built
    )


@functools.cache
def make_targets() -> frozenset[str]:
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    return frozenset(re.findall(r"^([a-z][a-z-]*):", text, flags=re.M))


def nemo_subcommands() -> frozenset[str]:
    return frozenset(subcommand.name for subcommand in SUBCOMMANDS)
