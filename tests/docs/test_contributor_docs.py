"""The contributor docs stay true: every test, path, setting and command that the README,
CONTRIBUTING and the decision records cite exists; the decision records are all in their index,
in the shape it prescribes; and no placeholder is left in the prose."""

from __future__ import annotations

import importlib.util
import re

import pytest

from tests.docs.docs_text import (
    MAKE_COMMAND,
    NEMO_COMMAND,
    PYTHON_MODULE,
    REPO,
    VARIABLE,
    code,
    defined_test_names,
    defines,
    make_targets,
    matching_files,
    named_paths,
    nemo_subcommands,
    prose,
    variable_known,
)

ADR = REPO / "docs" / "adr"
RECORDS = sorted(ADR.glob("[0-9][0-9][0-9][0-9]-*.md"))
DOCS = ["README.md", "CONTRIBUTING.md", *(str(path.relative_to(REPO)) for path in ADR.glob("*.md"))]
documents = pytest.mark.parametrize("document", sorted(DOCS))

_TEST_NAME = re.compile(r"^test_\w+$")
_PLACEHOLDER = re.compile(r"\b(?:[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|TODO|TBD|FIXME|XXX)\b")
_ADR_HEAD = re.compile(
    r'\A---\ntitle: "ADR (?P<number>\d{4}): (?P<title>[^"\n]+)"\n---\n\n'
    r"# ADR (?P<heading_number>\d{4}): (?P<heading>[^\n]+)\n\nStatus: \S"
)
_INDEX_ROW = re.compile(r"^\| \[(?P<number>\d{4})\]\((?P<file>[^)]+)\) \|", re.M)
#: The sections every record has (README "Writing one"), in this order.
SECTIONS = ("Context", "Decision", "Consequences", "Alternatives rejected")


def _text(document: str) -> str:
    return (REPO / document).read_text(encoding="utf-8")


def _cited(document: str) -> str:
    """What a document says of the repository as it is: a record's Context tells what was there
    before its decision, so it is left out."""
    text = _text(document)
    if document.startswith("docs/adr/0"):
        text = re.sub(r"^## Context\n.*?(?=^## )", "", text, flags=re.S | re.M)
    return text


@documents
def test_cited_tests_exist(document: str) -> None:
    known = defined_test_names()
    missing = [
        token for token in code(_cited(document)) if _TEST_NAME.match(token) and token not in known
    ]
    assert not missing, f"{document} cites tests that do not exist: {missing}"


@documents
def test_cited_paths_and_symbols_exist(document: str) -> None:
    missing = []
    for line in code(_cited(document)):
        for path, symbol in named_paths(line):
            files = matching_files(path)
            if not files:
                missing.append(path)
            elif symbol and not any(defines(f, symbol) for f in files if f.endswith(".py")):
                missing.append(f"{path}::{symbol}")
    assert not missing, f"{document} cites what the repository does not have: {missing}"


@documents
def test_cited_settings_exist(document: str) -> None:
    named = set(VARIABLE.findall(_cited(document)))
    unknown = sorted(name for name in named if not variable_known(name))
    assert not unknown, f"{document} cites variables nothing reads: {unknown}"


#: Named in a test only, as a removed setting would still be: never a known variable.
_ONLY_IN_A_TEST = "NEMO_TOOLPLANE_SETTING_REMOVED_LONG_AGO"


def test_a_variable_only_a_test_names_is_not_known() -> None:
    assert not variable_known(_ONLY_IN_A_TEST)
    # What a settings class reads, and a switch a test reads from the environment, are.
    assert variable_known("NEMO_TOOLPLANE_OAUTH_LEEWAY_SECONDS")
    assert variable_known("NEMO_UPDATE_GOLDEN")


@documents
def test_cited_commands_exist(document: str) -> None:
    lines = code(_cited(document))
    unknown = [
        f"make {target}"
        for line in lines
        for target in MAKE_COMMAND.findall(line)
        if target not in make_targets()
    ]
    unknown += [
        f"nemo {name}"
        for line in lines
        for name in NEMO_COMMAND.findall(line)
        if name not in nemo_subcommands()
    ]
    unknown += [
        f"python -m {module}"
        for line in lines
        for module in PYTHON_MODULE.findall(line)
        if importlib.util.find_spec(module) is None
    ]
    assert not unknown, f"{document} cites commands that do not exist: {unknown}"


_MARKER = re.compile(r"\b(?:TODO|TBD|FIXME|XXX)\b")
#: Trees of installed or generated files, never written by hand.
_NOT_WRITTEN_HERE = {".venv", ".tools", ".nemo", ".git", "node_modules", ".pytest_cache"}
EVERY_DOCUMENT = sorted(
    str(path.relative_to(REPO))
    for path in REPO.glob("**/*.md")
    if _NOT_WRITTEN_HERE.isdisjoint(path.relative_to(REPO).parts)
)


def test_every_document_is_found() -> None:
    assert set(DOCS) < set(EVERY_DOCUMENT)
    assert "docs/toolplane/tools.md" in EVERY_DOCUMENT


@pytest.mark.parametrize("document", EVERY_DOCUMENT)
def test_no_document_is_left_unfinished(document: str) -> None:
    left = sorted(set(_MARKER.findall(prose(_text(document)))))
    assert not left, f"{document} is unfinished: finish or remove what {left} marks"


@documents
def test_no_placeholder_is_left_in_the_prose(document: str) -> None:
    left = sorted(set(_PLACEHOLDER.findall(prose(_text(document)))))
    assert not left, f"{document} has placeholders or code names outside code: {left}"


def test_the_checks_see_what_they_check() -> None:
    # Not vacuous: the docs cite tests, paths with symbols, settings and commands.
    contributing = _text("CONTRIBUTING.md")
    lines = code(contributing)
    assert sum(bool(_TEST_NAME.match(token)) for token in lines) >= 3
    assert any(symbol for line in lines for _, symbol in named_paths(line))
    assert VARIABLE.search(_text("README.md"))
    assert any(MAKE_COMMAND.findall(line) for line in lines)
    assert _PLACEHOLDER.search(prose("It takes about SOME_MINUTES minutes. `CODE_NAME`"))


def test_the_decision_index_lists_every_record() -> None:
    rows = {row["number"]: row["file"] for row in _INDEX_ROW.finditer(_text("docs/adr/README.md"))}
    records = {path.name[:4]: path.name for path in RECORDS}
    missing = sorted(name for number, name in records.items() if rows.get(number) != name)
    assert not missing, (
        f"add a row | [NNNN](NNNN-topic.md) | decision | where it lives | to the table of "
        f"docs/adr/README.md for each of {missing}"
    )
    assert rows == records, f"docs/adr/README.md links records that do not exist: {rows}"
    numbers = [int(number) for number in records]
    assert numbers == list(range(1, len(numbers) + 1)), "records are numbered 0001, 0002, ..."


@pytest.mark.parametrize("record", RECORDS, ids=lambda path: path.name[:4])
def test_each_record_has_its_front_matter_title_and_sections(record: object) -> None:
    path = ADR / str(getattr(record, "name", record))
    text = path.read_text(encoding="utf-8")
    head = _ADR_HEAD.match(text)
    assert head is not None, (
        f'{path.name} starts with front matter title: "ADR NNNN: <decision>", the same H1, '
        "then its Status line"
    )
    assert head["number"] == head["heading_number"] == path.name[:4]
    assert head["title"] == head["heading"]
    sections = re.findall(r"^## (.+)$", text, flags=re.M)
    assert [s for s in sections if s in SECTIONS] == list(SECTIONS), (
        f"{path.name} has the sections {', '.join(SECTIONS)}, in that order"
    )


#: What a fresh machine needs from its system packages, with where the repository needs it: the
#: README's set-up must name each package while the need is there.
SYSTEM_PACKAGES = {
    "python3-venv": ("Makefile", "python3 -m venv"),  # uv into .tools/ when not on PATH
    "build-essential": ("local-model/build.sh", "compiles llama.cpp"),
    "git": ("Makefile", ".git#branch=main"),  # buf breaking against main
    "npm": ("libs/nemo-devtools/src/nemo_devtools/node.py", 'shutil.which("npm")'),
}


@pytest.mark.parametrize("package", sorted(SYSTEM_PACKAGES))
def test_the_readme_names_the_system_packages_a_fresh_machine_needs(package: str) -> None:
    path, need = SYSTEM_PACKAGES[package]
    assert need in (REPO / path).read_text(encoding="utf-8"), f"{path} no longer needs {package}"
    setup = _text("README.md").split("\n## Two commands\n", 1)[1].split("\n## ", 1)[0]
    install = [line for line in code(setup) if line.startswith("apt-get install ")]
    assert install, "the README's Two commands shows the apt-get install line of a fresh machine"
    assert package in install[0].split(), f"add {package} to the README's apt-get install line"
