"""Running a module's tests against its mutants, one forked process per mutant.

The runner process imports once what every run needs and no mutant can change (pytest,
hypothesis, the third-party libraries, the generated stubs and ``nemo-core``, which imports no
service), then forks a child per mutant. The child puts an import hook in front of the others
that compiles the mutated tree in place of the file, and runs pytest in-process on the tests
that executed the mutated lines in the unmutated run first, fastest first, then the others,
stopping at the first failure. Everything of the repository but those two libraries is imported
afresh by each child, so every module that imports the mutated one sees the mutant.

Hypothesis runs derandomized and without its example database, so a run's verdicts do not
depend on an earlier run; without deadlines and speed health checks, so a loaded machine cannot
fail a test for a mutant; and without shrinking, since one failing example kills the mutant.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any

import pytest

STABLE_LIBRARIES = ("libs/nemo-protos/src", "libs/nemo-core/src")
"""Parts of the repository a child may share with the runner: they import no service."""

_POLL_SECONDS = 0.02


class Outcome(StrEnum):
    KILLED = "killed"
    SURVIVED = "survived"
    TIMEOUT = "timeout"
    """Counted as killed: the mutant made a test hang."""
    UNCOVERED = "uncovered"
    """No test executes the mutated code: a survivor found without running anything."""


def module_name(path: str) -> str:
    """The import name of a source file under a ``src/`` directory."""
    parts = Path(path).with_suffix("").parts
    parts = parts[parts.index("src") + 1 :]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


class _MutantLoader(importlib.machinery.SourceFileLoader):
    def __init__(self, fullname: str, path: str, code: CodeType) -> None:
        super().__init__(fullname, path)
        self._code = code

    def get_code(self, fullname: str) -> CodeType:
        return self._code


class _MutantFinder(importlib.abc.MetaPathFinder):
    """Serves the mutated code for one module name; every other import goes on as usual."""

    def __init__(self, name: str, path: Path, code: CodeType) -> None:
        self._name, self._path, self._code = name, path, code

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self._name:
            return None
        package = self._path.name == "__init__.py"
        return importlib.util.spec_from_file_location(
            fullname,
            self._path,
            loader=_MutantLoader(fullname, str(self._path), self._code),
            submodule_search_locations=[str(self._path.parent)] if package else None,
        )


class _Selection:
    """A pytest plugin: only the chosen tests, in the chosen order."""

    def __init__(self, order: Sequence[str] | None) -> None:
        self._rank = None if order is None else {nodeid: i for i, nodeid in enumerate(order)}

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[Any]) -> None:
        if self._rank is None:
            return
        rank = self._rank
        kept = sorted((item for item in items if item.nodeid in rank), key=lambda i: rank[i.nodeid])
        config.hook.pytest_deselected(items=[item for item in items if item.nodeid not in rank])
        items[:] = kept


class _Baseline:
    """A pytest plugin for the unmutated run: per test its duration, outcome and covered lines
    (each test's call phase is a coverage context; imports and fixtures are the empty one)."""

    def __init__(self, coverage: Any) -> None:
        self.coverage = coverage
        self.durations: dict[str, float] = {}
        self.failed: list[str] = []

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: Any) -> Iterator[None]:
        self.coverage.switch_context(item.nodeid)
        try:
            return (yield)
        finally:
            self.coverage.switch_context("")

    def pytest_runtest_logreport(self, report: Any) -> None:
        self.durations[report.nodeid] = self.durations.get(report.nodeid, 0.0) + report.duration
        if report.failed and report.nodeid not in self.failed:
            self.failed.append(report.nodeid)


def _quiet_hypothesis() -> None:
    from hypothesis import HealthCheck, Phase, settings

    settings.register_profile(
        "mutation",
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.differing_executors],
        # A failing example is enough: shrinking it would only make the report nicer.
        phases=[Phase.explicit, Phase.generate, Phase.target],
        report_multiple_bugs=False,
        print_blob=False,
    )
    settings.load_profile("mutation")


def _pytest_args(tests: Sequence[str], *, first_failure: bool) -> list[str]:
    args = [
        *tests,
        "-q",
        "-p",
        "no:cacheprovider",
        "--no-header",
        "-o",
        "console_output_style=classic",
    ]
    return [*args, "-x"] if first_failure else args


def _in_child(work: Callable[[], int], log: Path) -> int:
    """Fork; the child runs ``work`` with its output in ``log`` and exits with its result."""
    pid = os.fork()
    if pid:
        return pid
    code = 3
    try:
        os.setpgid(0, 0)
        descriptor = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(descriptor, 1)
        os.dup2(descriptor, 2)
        code = work()
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _wait(pid: int, deadline: float | None) -> int | None:
    """The exit status of ``pid``, or None after killing it at ``deadline``."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if deadline is not None and time.monotonic() > deadline:
            _kill(pid)
            return None
        time.sleep(_POLL_SECONDS)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def preload(root: Path, tests: Sequence[str], log: Path) -> None:
    """Import in this process what collecting ``tests`` imports, but the repository's own code
    (besides :data:`STABLE_LIBRARIES`), so each child starts warm."""
    listing = log.with_suffix(".modules")

    def collect() -> int:
        code = int(pytest.main([*_pytest_args(tests, first_failure=False), "--collect-only"]))
        listing.write_text("\n".join(_shareable(root)), encoding="utf-8")
        return code

    status = _wait(_in_child(collect, log), None)
    if status != 0:
        raise RuntimeError(f"collecting {' '.join(tests)} failed; see {log}")
    for name in listing.read_text(encoding="utf-8").split():
        try:
            importlib.import_module(name)
        except Exception:  # noqa: S112 - a module that imports only in context is skipped
            continue


def _shareable(root: Path) -> list[str]:
    stable = tuple(str(root / part) for part in STABLE_LIBRARIES)
    own = str(root)
    venv = str(root / ".venv")
    names = []
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if name == "__main__" or not isinstance(file, str):
            continue
        if file.startswith(own) and not file.startswith(venv) and not file.startswith(stable):
            continue
        names.append(name)
    return names


@dataclass(frozen=True)
class Baseline:
    """The unmutated run of a module's tests."""

    durations: dict[str, float]
    """Seconds per test (setup, call and teardown)."""
    covered: dict[str, dict[int, list[str]]]
    """Per source file, the tests that executed each line ("" for imports and fixtures)."""
    seconds: float


def baseline(root: Path, tests: Sequence[str], sources: Sequence[str], log: Path) -> Baseline:
    """Run ``tests`` once, unmutated, measuring what each test executes of ``sources``."""
    result = log.with_suffix(".json")

    def run() -> int:
        import coverage

        _quiet_hypothesis()
        cov = coverage.Coverage(
            data_file=None, include=[str(root / s) for s in sources], config_file=False
        )
        plugin = _Baseline(cov)
        cov.start()
        try:
            code = int(pytest.main(_pytest_args(tests, first_failure=False), plugins=[plugin]))
        finally:
            cov.stop()
        data = cov.get_data()
        covered = {
            source: {
                line: sorted(contexts)
                for line, contexts in data.contexts_by_lineno(str(root / source)).items()
            }
            for source in sources
        }
        result.write_text(
            json.dumps(
                {"durations": plugin.durations, "covered": covered, "failed": plugin.failed}
            ),
            encoding="utf-8",
        )
        return code

    started = time.monotonic()
    status = _wait(_in_child(run, log), None)
    seconds = time.monotonic() - started
    if status != 0 or not result.exists():
        raise RuntimeError(f"the unmutated tests do not pass ({' '.join(tests)}); see {log}")
    data = json.loads(result.read_text(encoding="utf-8"))
    covered = {
        source: {int(line): contexts for line, contexts in lines.items()}
        for source, lines in data["covered"].items()
    }
    return Baseline(data["durations"], covered, seconds)


def tests_for(base: Baseline, source: str, lines: tuple[int, int]) -> list[str] | None:
    """The order to run the tests in against a mutant of ``lines`` of ``source``: those that
    executed them first, fastest first, then the others (a line that runs once per process, to
    fill a cache, is covered by whichever test ran first, yet every later test depends on it);
    None when no test executed them, so no test can kill the mutant."""
    first, last = lines
    contexts: set[str] = set()
    for line in range(first, last + 1):
        contexts.update(base.covered.get(source, {}).get(line, ()))
    if not contexts:
        return None
    return sorted(
        base.durations,
        key=lambda nodeid: ("" not in contexts and nodeid not in contexts, base.durations[nodeid]),
    )


@dataclass
class Job:
    """One mutant to run: its code, the tests to run against it, and where its output goes."""

    key: str
    name: str
    path: Path
    tree: ast.Module
    tests: Sequence[str]
    order: Sequence[str]
    timeout: float
    log: Path


def start(job: Job) -> int:
    """Fork the child that runs ``job``; returns its pid."""
    code = compile(job.tree, str(job.path), "exec")

    def run() -> int:
        sys.meta_path.insert(0, _MutantFinder(job.name, job.path, code))
        _quiet_hypothesis()
        return int(
            pytest.main(
                _pytest_args(job.tests, first_failure=True), plugins=[_Selection(job.order)]
            )
        )

    return _in_child(run, job.log)


def verdict(status: int | None) -> Outcome:
    """What a child's exit status says of its mutant."""
    if status is None:
        return Outcome.TIMEOUT
    if status == pytest.ExitCode.OK:
        return Outcome.SURVIVED
    if status == pytest.ExitCode.NO_TESTS_COLLECTED:
        raise RuntimeError("a mutant's run selected no test")
    # A test failed, or the mutated module broke an import (collection interrupted, a conftest
    # that cannot load): the same run passed on the unmutated code.
    return Outcome.KILLED


def run_jobs(jobs: Sequence[Job], workers: int, report: Callable[[Job, Outcome], None]) -> None:
    """Run ``jobs`` with up to ``workers`` children at once, reporting each outcome."""
    pending = list(reversed(jobs))
    running: dict[int, tuple[Job, float]] = {}
    try:
        while pending or running:
            while pending and len(running) < workers:
                job = pending.pop()
                running[start(job)] = (job, time.monotonic() + job.timeout)
            for pid, (job, deadline) in list(running.items()):
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    del running[pid]
                    report(job, verdict(os.waitstatus_to_exitcode(status)))
                elif time.monotonic() > deadline:
                    del running[pid]
                    _kill(pid)
                    report(job, Outcome.TIMEOUT)
            time.sleep(_POLL_SECONDS)
    finally:
        for pid in running:
            _kill(pid)


def scratch() -> Path:
    """A directory for the children's logs."""
    return Path(tempfile.mkdtemp(prefix="nemo-mutation-"))
