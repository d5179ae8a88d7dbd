"""`make mutate`: the mutation score of each rule module, its survivors, and a failing exit below
the threshold.

``python -m mutation [MODULE ...] [--jobs N] [--list] [--only ID ...]``: MODULE is a module's
slug in ``modules.toml`` (all by default); ``--jobs`` is the number of mutants run at once
(default: half the cores, at least one; ``NEMO_MUTATE_JOBS`` too); ``--list`` prints the mutants
and runs nothing; ``--only`` runs just the mutants whose id matches one of the patterns (``*``
matches any text), to check that a new test kills the survivors of an earlier run, and scores
that selection only. The score of a module is killed / (mutants - equivalent): the mutants listed in
``equivalent.toml`` beside the configuration, each with the argument why no test can kill it,
are not run; an entry that matches no mutant is an error, so the list stays true as the code
changes.
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from mutation.config import (
    Equivalents,
    RuleModule,
    glob_pattern,
    load_equivalents,
    load_modules,
)
from mutation.execution import (
    Job,
    Outcome,
    baseline,
    module_name,
    preload,
    run_jobs,
    scratch,
    tests_for,
)
from mutation.mutants import Mutant, mutants_of

HERE = Path(__file__).resolve().parent


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m mutation", description=__doc__)
    parser.add_argument("modules", nargs="*", help="names from modules.toml (default: all)")
    default_jobs = int(os.environ.get("NEMO_MUTATE_JOBS") or max(1, (os.cpu_count() or 2) // 2))
    parser.add_argument("--jobs", type=int, default=default_jobs)
    parser.add_argument("--list", action="store_true", help="print the mutants, run nothing")
    parser.add_argument(
        "--only", nargs="+", default=[], metavar="ID", help="run only mutants matching these ids"
    )
    parser.add_argument("--root", type=Path, default=HERE.parent, help=argparse.SUPPRESS)
    parser.add_argument(
        "--config", type=Path, default=HERE / "modules.toml", help=argparse.SUPPRESS
    )
    return parser.parse_args()


class Tally:
    """The outcomes of one module's mutants."""

    def __init__(self, module: RuleModule, mutants: list[Mutant], equivalent: set[str]) -> None:
        self.module = module
        self.mutants = mutants
        self.equivalent = equivalent
        self.outcomes: dict[str, Outcome] = {}

    @property
    def killed(self) -> int:
        return sum(o in (Outcome.KILLED, Outcome.TIMEOUT) for o in self.outcomes.values())

    @property
    def survivors(self) -> list[Mutant]:
        return [
            m
            for m in self.mutants
            if self.outcomes.get(m.id) in (Outcome.SURVIVED, Outcome.UNCOVERED)
        ]

    @property
    def score(self) -> float:
        judged = len(self.mutants) - len(self.equivalent)
        return 100.0 * self.killed / judged if judged else 100.0


def _run_module(
    root: Path,
    module: RuleModule,
    equivalents: Equivalents,
    jobs: int,
    logs: Path,
    only: Sequence[str],
) -> Tally:
    mutants = [m for source in module.sources for m in mutants_of(root, source)]
    if only:
        chosen = [glob_pattern(pattern) for pattern in only]
        mutants = [m for m in mutants if any(p.fullmatch(m.id) for p in chosen)]
    equivalent = {m.id for m in mutants if equivalents.covers(m)}
    tally = Tally(module, mutants, equivalent)
    print(f"{module.name}: {len(mutants)} mutants, {len(equivalent)} listed as equivalent")
    started = time.monotonic()
    preload(root, module.arguments, logs / f"{module.slug}-preload.log")
    base = baseline(root, module.arguments, module.sources, logs / f"{module.slug}-baseline.log")
    print(f"  unmutated run: {len(base.durations)} tests, {base.seconds:.1f} s")
    trees = {
        source: ast.parse((root / source).read_text(encoding="utf-8")) for source in module.sources
    }
    todo: list[Job] = []
    for index, mutant in enumerate(mutants):
        if mutant.id in equivalent:
            continue
        order = tests_for(base, mutant.path, mutant.lines)
        if order is None:
            tally.outcomes[mutant.id] = Outcome.UNCOVERED
            continue
        todo.append(
            Job(
                key=mutant.id,
                name=module_name(mutant.path),
                path=root / mutant.path,
                tree=mutant.tree(trees[mutant.path]),
                tests=module.arguments,
                order=order,
                timeout=20.0 + 3.0 * base.seconds,
                log=logs / f"{module.slug}-{index}.log",
            )
        )

    done = 0

    def report(job: Job, outcome: Outcome) -> None:
        nonlocal done
        done += 1
        tally.outcomes[job.key] = outcome
        if outcome is Outcome.SURVIVED:
            print(f"  survived: {job.key}", flush=True)
        else:
            job.log.unlink(missing_ok=True)
        if done % 50 == 0:
            minutes = (time.monotonic() - started) / 60
            print(f"  {done} of {len(todo)} run, {minutes:.1f} min", flush=True)

    run_jobs(todo, jobs, report)
    minutes = (time.monotonic() - started) / 60
    print(f"  {tally.killed} killed, {len(tally.survivors)} survived, {tally.score:.1f}% "
          f"in {minutes:.1f} min")  # fmt: skip
    return tally


def _print_results(tallies: list[Tally], threshold: float) -> None:
    for tally in tallies:
        if not tally.survivors:
            continue
        print(f"\nSurvivors of {tally.module.name}:")
        for mutant in tally.survivors:
            why = " (no test executes it)" if tally.outcomes[mutant.id] is Outcome.UNCOVERED else ""
            print(f"  {mutant.path}:{mutant.line}{why}\n    {mutant.id}")
    print(f"\n| module | mutants | killed | equivalent | survived | score (≥ {threshold:g}%) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for tally in tallies:
        mark = "" if tally.score >= threshold else " **below**"
        print(
            f"| {tally.module.name} | {len(tally.mutants)} | {tally.killed} | "
            f"{len(tally.equivalent)} | {len(tally.survivors)} | {tally.score:.1f}%{mark} |"
        )


def main() -> int:
    arguments = _arguments()
    root = arguments.root.resolve()
    config = arguments.config.resolve()
    os.chdir(root)  # the tests are named relative to the root, as pytest runs them
    threshold, modules = load_modules(config)
    if arguments.modules:
        unknown = set(arguments.modules) - {m.slug for m in modules}
        if unknown:
            print(f"unknown modules {sorted(unknown)}; known: {[m.slug for m in modules]}")
            return 2
        modules = [m for m in modules if m.slug in arguments.modules]
    equivalents = load_equivalents(config.with_name("equivalent.toml"))
    if arguments.list:
        for module in modules:
            for source in module.sources:
                for mutant in mutants_of(root, source):
                    mark = "equivalent " if equivalents.covers(mutant) else ""
                    print(f"{mark}{mutant.path}:{mutant.line}  {mutant.id}")
        return 0
    started = time.monotonic()
    logs = scratch()
    tallies = [
        _run_module(root, module, equivalents, arguments.jobs, logs, arguments.only)
        for module in modules
    ]
    if arguments.only:
        print("\nscores of the selected mutants only (--only), not of the modules:")
    _print_results(tallies, threshold)
    print(f"\n{(time.monotonic() - started) / 60:.1f} min with {arguments.jobs} job(s); "
          f"survivors' output in {logs}")  # fmt: skip
    stale = equivalents.unmatched(
        [m for module in modules for s in module.sources for m in mutants_of(root, s)],
        {s for module in modules for s in module.sources},
    )
    for entry in stale:
        print(f"equivalent.toml: no mutant matches {entry}: remove the entry")
    below = [t.module.name for t in tallies if t.score < threshold]
    if below:
        print(f"below {threshold:g}%: {', '.join(below)}")
    return 1 if below or stale else 0


if __name__ == "__main__":
    sys.exit(main())
