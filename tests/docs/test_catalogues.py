"""The pages that list what a registry holds say what it holds: the tool catalogue
(``docs/toolplane/tools.md``) against the tool registry, the tool scopes wherever a page names
them against the ``Scope`` enum, and the evaluation's input set
(``docs/operations/evaluation.md``) against ``nemo_eval.cases``."""

from __future__ import annotations

import re
from collections.abc import Iterator

from nemo_eval.cases import CASES, LEARNERS
from nemo_gateway.prompts.registry import REGISTRY
from nemo_toolplane.registry import AnyTool
from nemo_toolplane.tool_kinds import Mode, Risk, Scope
from nemo_toolplane.tools import build_registry
from tests.docs.docs_text import REPO, repository_files

TOOLS_PAGE = "docs/toolplane/tools.md"
EVALUATION_PAGE = "docs/operations/evaluation.md"
_NAME = re.compile(r"`([a-z][a-z0-9_]*\.[a-z][a-z0-9_]*)`")


def _latest() -> dict[str, AnyTool]:
    registry = build_registry()
    tools = {}
    for name in {tool.name for tool in registry.versions()}:
        tool = registry.resolve(name)
        assert tool is not None
        tools[name] = tool
    return tools


TOOLS = _latest()


def _tables(text: str) -> Iterator[list[dict[str, str]]]:
    """The Markdown tables of ``text``, each as rows keyed by the header's cells."""
    lines = text.splitlines()
    start = 0
    while start < len(lines):
        if not lines[start].startswith("|"):
            start += 1
            continue
        end = start
        while end < len(lines) and lines[end].startswith("|"):
            end += 1
        header, *rows = (
            [cell.strip() for cell in line.strip("|").split("|")] for line in lines[start:end]
        )
        yield [dict(zip(header, row, strict=True)) for row in rows[1:]]
        start = end


def _section(text: str, heading: str) -> str:
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def _catalogue_rows() -> dict[str, dict[str, str]]:
    """The rows of the catalogue's tool tables, by the tool their first cell names."""
    rows = {}
    for table in _tables((REPO / TOOLS_PAGE).read_text(encoding="utf-8")):
        for row in table:
            if "tool" in row and (name := _NAME.fullmatch(row["tool"])):
                assert name[1] not in rows, f"{TOOLS_PAGE} lists {name[1]} twice"
                rows[name[1]] = row
    return rows


def test_the_catalogue_lists_every_tool_and_no_other() -> None:
    listed = set(_catalogue_rows())
    missing, extra = sorted(set(TOOLS) - listed), sorted(listed - set(TOOLS))
    assert not missing, f"add a row for each of {missing} to its domain's table in {TOOLS_PAGE}"
    assert not extra, f"{TOOLS_PAGE} lists tools that are not registered: {extra}"


def test_the_catalogue_names_each_tools_view_risk_and_mode() -> None:
    for name, row in _catalogue_rows().items():
        tool = TOOLS[name]
        if "agent view" in row:
            view = "none" if tool.agent_view is None else f"`{tool.agent_view}`"
            assert row["agent view"] == view, f"{TOOLS_PAGE}: {name} reads agent view {view}"
        if "risk/mode" in row:
            declared = f"{tool.risk.value}/{tool.mode.value}"
            assert row["risk/mode"] == declared, f"{TOOLS_PAGE}: {name} is {declared}"
        if tool.agent_view is not None:
            assert "agent view" in row, f"{name} reads a view: list it with its view"


def test_the_risk_table_lists_the_tools_of_each_risk() -> None:
    text = (REPO / TOOLS_PAGE).read_text(encoding="utf-8")
    [table] = [t for t in _tables(text) if t and "risk" in t[0] and "tools" in t[0]]
    by_risk = {Risk(row["risk"]): row["tools"] for row in table}
    assert set(by_risk) == set(Risk)
    for risk, cell in by_risk.items():
        of_risk = {name for name, tool in TOOLS.items() if tool.risk is risk}
        if risk is Risk.LOW:
            # "every read tool below": the LOW tools are exactly the reads.
            reads = {name for name, tool in TOOLS.items() if tool.mode is Mode.READ}
            assert of_risk == reads, f"{TOOLS_PAGE}: a LOW tool that writes, or a read above LOW"
        else:
            listed = set(_NAME.findall(cell))
            assert listed == of_risk, f"{TOOLS_PAGE}, risk {risk}: list {sorted(of_risk)}"
            assert listed or cell == "none yet"


_SCOPE_WORD = re.compile(r"(?<![\w.])[a-z]+\.(?:read|write)\b")
_NUMBERS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
_COUNTED = re.compile(rf"\b({'|'.join(_NUMBERS)}|\d+)\s+tool\s+scopes\b", re.IGNORECASE)


def _pages() -> Iterator[tuple[str, str]]:
    """The docs, README and CONTRIBUTING (the changelog keeps what was true then)."""
    for path in repository_files():
        in_docs = path.startswith("docs/") or "/" not in path
        if path.endswith(".md") and in_docs and path != "CHANGELOG.md":
            yield path, (REPO / path).read_text(encoding="utf-8")


def test_the_docs_name_the_tool_scopes_as_the_tools_declare_them() -> None:
    scopes = {scope.value for scope in Scope}
    problems = []
    for path, text in _pages():
        for block in re.split(r"\n\s*\n", text):
            named = set(_SCOPE_WORD.findall(block))
            problems += [
                f"{path} names scope {word!r}, which no tool needs" for word in named - scopes
            ]
            # Three or more make a list of the scopes: it names them all.
            if len(named) >= 3 and named != scopes:
                problems.append(
                    f"{path} lists {sorted(named)}, not every tool scope: {sorted(scopes)}"
                )
        for number in _COUNTED.findall(text):
            count = int(number) if number.isdigit() else _NUMBERS.index(number.lower()) + 1
            if count != len(scopes):
                problems.append(f"{path} counts {number} tool scopes; there are {len(scopes)}")
    assert not problems, "\n".join(problems)


def test_the_evaluation_page_names_the_input_set() -> None:
    text = _section((REPO / EVALUATION_PAGE).read_text(encoding="utf-8"), "The input set")
    known = {spec.prompt_id for spec in REGISTRY}
    named = {name for name in _NAME.findall(text) if name in known}
    assert named == {case.prompt_id for case in CASES}, (
        f"'The input set' in {EVALUATION_PAGE} names each prompt of nemo_eval.cases: "
        f"add {sorted({case.prompt_id for case in CASES} - named)}, "
        f"remove {sorted(named - {case.prompt_id for case in CASES})}"
    )
    learners = set(re.findall(r"\bL-\d{4}-\d+\b", text))
    assert learners == {learner for learner, _ in LEARNERS}
