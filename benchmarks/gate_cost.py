"""The identifier gate's cost per build: what it read before it learned the child's circle, and
what it costs now, by how much of the build it has seen before.

On the benchmark's seeded database, in this process: L-2041-1's bundles of the prompt purposes are
read, assembled and rendered as ``ContextBuilder`` does, then the gate runs on each as a build
runs it (text a person wrote masked, then the whole bundle judged), timed in CPU time over many
rounds:

- **keys and field names**: the rules the gate had before the circle (field names, the learner's
  keys, keys written in text, as written and decoded), each string read afresh: the "before";
- **the same build again**: every string and the circle seen before, as when a learner asks
  twice while its data stays the same (each string's verdict is remembered, see
  ``nemo_context.gate.reading``);
- **a new rendered text**: the learner's data changed, so the text rendered from it is new; the
  other strings (node ids, curriculum titles) were seen before;
- **a new circle**: a learner built for the first time (or whose circle changed), the strings seen
  before;
- **nothing seen**: a new circle and strings never read, as the first build after a start.

The report gives each against the service CPU of one build (``benchmarks.context``), so it reads
as the gate's share of a build.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from nemo_context.builder import assemble
from nemo_context.gate import gate, walk
from nemo_context.gate.circle import Circle
from nemo_context.gate.masking import TextMasker
from nemo_context.gate.names import is_forbidden_name
from nemo_context.gate.reading import Reading, forget, key_rule
from nemo_context.gate.rules import WRITTEN_TEXT_FIELDS
from nemo_context.gate.text import prepare, value_matcher
from nemo_context.gate.tokens import prepare as prepare_tokens
from nemo_context.purposes import PURPOSES
from nemo_context.render import render_bundle
from nemo_context.repository import PostgresLearnerRepository
from nemo_context.settings import DEVELOPMENT_IDENTIFIER_KEY
from nemo_core.db import create_pool
from nemo_protos.context.v1 import learner_context_pb2 as pb
from nemo_protos.type.v1 import locale_pb2

ROUNDS = 300
PURPOSE_NAMES = ("tutor_hint", "plan_explanation", "portrait_summary")


@dataclass(frozen=True)
class GateCost:
    """Microseconds of CPU per build, averaged over the prompt purposes."""

    keys_us: float
    """Keys and field names alone, each string read afresh: the gate before the circle."""
    again_us: float
    new_text_us: float
    new_circle_us: float
    unseen_us: float

    def describe(self, build_cpu_ms: float | None) -> str:
        def share(us: float) -> str:
            return f"{us:.0f} us = {us / (build_cpu_ms * 1000):.1%}" if build_cpu_ms else "-"

        return (
            f"identifier gate per build (CPU, {', '.join(PURPOSE_NAMES)}; share of a build): "
            f"before the circle (keys and field names) {share(self.keys_us)}; now, the same "
            f"build again {share(self.again_us)}, a new rendered text "
            f"{share(self.new_text_us)}, a new circle {share(self.new_circle_us)}, nothing "
            f"seen {share(self.unseen_us)}"
        )


@dataclass(frozen=True)
class _Build:
    bundle: pb.ContextBundle
    forbidden: frozenset[str]
    circle: Circle


def _gated(bundle: pb.ContextBundle, forbidden: frozenset[str], circle: Circle) -> None:
    """The gate as ``ContextBuilder.build`` runs it: written text masked, the bundle judged."""
    copy = pb.ContextBundle()
    copy.CopyFrom(bundle)
    TextMasker(value_matcher(tuple(sorted(forbidden))), circle).fields(copy, WRITTEN_TEXT_FIELDS)
    gate(copy, forbidden_values=forbidden, circle=circle)


def _keys_and_names(bundle: pb.ContextBundle, forbidden: frozenset[str]) -> None:
    gathered = walk.Gathered()
    gathered.plain(bundle, "ContextBundle")
    assert not any(is_forbidden_name(name) for name, _ in gathered.names)
    matcher = value_matcher(tuple(sorted(forbidden)))
    for text in {*gathered.texts, *gathered.curriculum}:
        key_rule(Reading(text), matcher)


def _other_circle(circle: Circle, round_: int) -> Circle:
    """``circle`` with one more person's phone: a circle the gate has not seen."""
    return dataclasses.replace(circle, phones=circle.phones | {f"{round_:032x}"})


def _cpu_us(builds: list[_Build], run: Callable[[int, _Build], None]) -> float:
    """CPU microseconds per build of ``run`` (given the round and the build), averaged."""
    for build in builds:
        run(0, build)  # warm: tables built, the first build's readings kept
    total = 0.0
    for round_ in range(1, ROUNDS + 1):
        for build in builds:
            started = time.process_time()
            run(round_, build)
            total += time.process_time() - started
    return total * 1e6 / (ROUNDS * len(builds))


def _again(_: int, build: _Build) -> None:
    _gated(build.bundle, build.forbidden, build.circle)


def _new_text(round_: int, build: _Build) -> None:
    bundle = pb.ContextBundle()
    bundle.CopyFrom(build.bundle)
    bundle.rendered_text += f"\n({round_})"
    _gated(bundle, build.forbidden, build.circle)


def _new_circle(round_: int, build: _Build) -> None:
    _gated(build.bundle, build.forbidden, _other_circle(build.circle, round_))


def _unseen(round_: int, build: _Build) -> None:
    circle = _other_circle(build.circle, round_)
    forget()
    _gated(build.bundle, build.forbidden, circle)


def costs(builds: list[_Build]) -> GateCost:
    """The gate's cost on ``builds`` in each case of the module docstring."""
    return GateCost(
        keys_us=_cpu_us(builds, lambda _, build: _keys_and_names(build.bundle, build.forbidden)),
        again_us=_cpu_us(builds, _again),
        new_text_us=_cpu_us(builds, _new_text),
        new_circle_us=_cpu_us(builds, _new_circle),
        unseen_us=_cpu_us(builds, _unseen),
    )


async def measure_gate(context_dsn: str) -> GateCost:
    """The gate's cost on L-2041-1's prompt bundles (see the module docstring)."""
    prepare()
    prepare_tokens()
    key = DEVELOPMENT_IDENTIFIER_KEY.encode()
    pool = await create_pool(context_dsn, max_size=1)
    builds: list[_Build] = []
    try:
        repository = PostgresLearnerRepository(pool, identifier_key=key)
        now = datetime.now(UTC)
        for name in PURPOSE_NAMES:
            purpose = PURPOSES[name]
            record = await repository.read("L-2041-1", purpose, now)
            assert record is not None
            bundle = assemble(
                record, purpose, learner_ref="nemo_bench", built_at=now, locale=locale_pb2.LOCALE_VI
            )
            bundle.rendered_text = render_bundle(bundle)
            builds.append(_Build(bundle, record.linked_ids | {"L-2041-1"}, record.circle))
    finally:
        await pool.close()
    return costs(builds)
