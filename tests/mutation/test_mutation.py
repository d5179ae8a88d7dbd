"""`make mutate` itself: the mutants it makes, the equivalents it may exclude, and a whole run on a
small project of its own, where it must kill what the project's tests catch and report the rest."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mutation.config import load_equivalents, load_modules
from mutation.mutants import mutants_of

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "mutation" / "modules.toml"

SAMPLE = '''\
"""A rule of the sample project."""

LIMIT = 3


def allowed(count: int, names: list[str]) -> bool:
    """Whether a group may start."""
    if count > LIMIT:
        return False
    return "admin" not in names


def unused() -> int:
    return 1 + 1
'''
SAMPLE_TESTS = """\
from sample.rules import allowed


def test_a_small_group_without_an_admin_starts() -> None:
    assert allowed(1, [])


def test_a_large_group_does_not() -> None:
    assert not allowed(4, [])
"""
SAMPLE_PATH = "src/sample/rules.py"
M = f"{SAMPLE_PATH}::"


def _sample(tmp_path: Path, equivalents: str) -> Path:
    (tmp_path / "src" / "sample").mkdir(parents=True)
    (tmp_path / "src" / "sample" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / SAMPLE_PATH).write_text(SAMPLE, encoding="utf-8")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_rules.py").write_text(SAMPLE_TESTS, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\npythonpath = src\n", encoding="utf-8")
    config = tmp_path / "mutation" / "modules.toml"
    config.parent.mkdir()
    config.write_text(
        textwrap.dedent(f"""\
            threshold = 90
            [[module]]
            slug = "sample"
            name = "sample rule"
            sources = ["{SAMPLE_PATH}"]
            tests = ["tests/test_rules.py"]
            """),
        encoding="utf-8",
    )
    config.with_name("equivalent.toml").write_text(equivalents, encoding="utf-8")
    return config


def test_each_operator_makes_its_mutant_named_by_scope_and_change(tmp_path: Path) -> None:
    _sample(tmp_path, "")
    assert [mutant.id for mutant in mutants_of(tmp_path, SAMPLE_PATH)] == [
        f"{M}LIMIT::number: 3 -> 4",
        f"{M}allowed::compare: count > LIMIT -> count >= LIMIT",
        f"{M}allowed::bool: False -> True",
        f"{M}allowed::compare: 'admin' not in names -> 'admin' in names",
        f"{M}allowed::string: 'admin' -> ''",
        f"{M}unused::arithmetic: 1 + 1 -> 1 - 1",
        f"{M}unused::number: 1 -> 2 #1",
        f"{M}unused::number: 1 -> 2 #2",
    ]


def test_each_mutant_changes_exactly_its_own_site(tmp_path: Path) -> None:
    _sample(tmp_path, "")
    original = ast.parse(SAMPLE)
    for mutant in mutants_of(tmp_path, SAMPLE_PATH):
        mutated = ast.unparse(mutant.tree(original))
        assert mutated != ast.unparse(original)
        compile(mutated, SAMPLE_PATH, "exec")
        assert mutant.after.strip("'") in mutated
    assert ast.unparse(original) == ast.unparse(ast.parse(SAMPLE))  # the original is untouched


def test_a_run_kills_what_the_tests_catch_and_lists_the_rest(tmp_path: Path) -> None:
    config = _sample(
        tmp_path,
        textwrap.dedent(f"""\
            [[equivalent]]
            file = "{SAMPLE_PATH}"
            scope = "allowed"
            operator = "compare"
            before = "count > LIMIT"
            why = "For the sake of the test."

            [[equivalent]]
            file = "{SAMPLE_PATH}"
            scope = "nowhere"
            why = "Matches nothing, so the run must say so."
            """),
    )
    run = subprocess.run(
        [sys.executable, "-m", "mutation", "--root", str(tmp_path), "--config", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    survivors = [line.strip() for line in run.stdout.splitlines() if line.startswith(f"    {M}")]
    assert survivors == [
        f"{M}allowed::string: 'admin' -> ''",
        f"{M}unused::arithmetic: 1 + 1 -> 1 - 1",
        f"{M}unused::number: 1 -> 2 #1",
        f"{M}unused::number: 1 -> 2 #2",
    ]
    assert "| sample rule | 8 | 3 | 1 | 4 | 42.9% **below** |" in run.stdout
    assert f"{SAMPLE_PATH}:14 (no test executes it)" in run.stdout
    assert "no mutant matches file = 'src/sample/rules.py', scope = 'nowhere'" in run.stdout


def test_an_equivalent_selects_one_of_the_same_changes_by_its_id(tmp_path: Path) -> None:
    selector = f'file = "{SAMPLE_PATH}"\nid = "{M}unused::number: 1 -> 2 #2"'
    config = _sample(tmp_path, f'[[equivalent]]\n{selector}\nwhy = "For the sake of the test."\n')
    equivalents = load_equivalents(config.with_name("equivalent.toml"))
    covered = [m.id for m in mutants_of(tmp_path, SAMPLE_PATH) if equivalents.covers(m)]
    assert covered == [f"{M}unused::number: 1 -> 2 #2"]


def test_every_rule_module_exists_and_every_equivalent_names_a_mutant() -> None:
    _, modules = load_modules(CONFIG)
    equivalents = load_equivalents(CONFIG.with_name("equivalent.toml"))
    sources = [source for module in modules for source in module.sources]
    for path in (*sources, *(test for module in modules for test in module.tests)):
        assert (ROOT / path).exists(), path
    mutants = [mutant for source in sources for mutant in mutants_of(ROOT, source)]
    assert equivalents.unmatched(mutants, sources) == []
    assert all(entry.why for entry in equivalents.entries)


@pytest.mark.parametrize(
    "source",
    [
        'def f(x: "Literal[1]") -> None:\n    """Doc."""\n    "a statement"\n',
        'from typing import Literal, TypeVar\nT = TypeVar("T")\nMode = Literal["a", "b"]\n',
        'from __future__ import annotations\n__all__ = ["f"]\n',
    ],
)
def test_docstrings_annotations_type_forms_and_exports_are_never_mutated(
    tmp_path: Path, source: str
) -> None:
    (tmp_path / "m.py").write_text(source, encoding="utf-8")
    assert list(mutants_of(tmp_path, "m.py")) == []


def test_only_runs_and_scores_the_selected_mutants(tmp_path: Path) -> None:
    config = _sample(tmp_path, "")
    run = subprocess.run(
        [
            sys.executable, "-m", "mutation", "--root", str(tmp_path), "--config", str(config),
            "--only", f"{M}LIMIT::*", f"{M}allowed::string*",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
    assert "sample rule: 2 mutants, 0 listed as equivalent" in run.stdout, run.stdout
    assert "scores of the selected mutants only" in run.stdout
    assert "| sample rule | 2 | 1 | 0 | 1 | 50.0% **below** |" in run.stdout
    assert run.returncode == 1
