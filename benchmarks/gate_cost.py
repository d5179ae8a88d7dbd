"""The identifier gate's cost per build, before and after it learned the child's circle.

On the benchmark's seeded database, in this process: L-2041-1's bundles of the prompt purposes are
read, assembled and rendered as ``ContextBuilder`` does, then timed (CPU time, many rounds):

- the whole gate as it runs now: masking of written text, then the walk with the learner's keys,
  field names, the circle's fingerprints and the contact shapes;
- the identifier part of it alone (circle and shapes over the bundle's strings), and the masking;
- "before": the whole minus the identifier part and the masking, which is the gate of keys and
  field names it was.

The report gives each against the service CPU of one build (``benchmarks.context``), so it reads
as the gate's share of a build.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from nemo_context.builder import assemble
from nemo_context.gate import gate, walk
from nemo_context.gate.circle import Circle
from nemo_context.gate.identifiers import identifier_kind
from nemo_context.gate.masking import TextMasker
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

    whole_us: float
    identifiers_us: float
    masking_us: float

    @property
    def before_us(self) -> float:
        return max(self.whole_us - self.identifiers_us - self.masking_us, 0.0)

    def describe(self, build_cpu_ms: float | None) -> str:
        def share(us: float) -> str:
            return f"{us / (build_cpu_ms * 1000):.1%}" if build_cpu_ms else "-"

        return (
            f"identifier gate per build (CPU, {', '.join(PURPOSE_NAMES)}): before (keys and field "
            f"names) {self.before_us:.0f} us = {share(self.before_us)} of a build; after (with "
            f"the circle, contact shapes and masking) {self.whole_us:.0f} us = "
            f"{share(self.whole_us)} (circle and shapes {self.identifiers_us:.0f} us, masking "
            f"{self.masking_us:.0f} us)"
        )


def _strings(bundle: pb.ContextBundle) -> str:
    """The bundle's strings joined as the walk joins them before it reads identifiers."""
    gathered = walk.Gathered()
    gathered.plain(bundle, "bundle")
    return "\0".join([*gathered.texts, *gathered.curriculum])


def _cpu_us(action: Any) -> float:
    started = time.process_time()
    for _ in range(ROUNDS):
        action()
    return (time.process_time() - started) * 1e6 / ROUNDS


def _costs(
    bundle: pb.ContextBundle, forbidden: frozenset[str], circle: Circle
) -> tuple[float, float, float]:
    """(whole gate without masking, identifier part, masking) of one bundle, in microseconds."""
    matcher = value_matcher(tuple(sorted(forbidden)))
    text = _strings(bundle)

    def mask() -> None:
        # A fresh copy each round: masking changes the bundle (copying costs a few us).
        copy = pb.ContextBundle()
        copy.CopyFrom(bundle)
        TextMasker(matcher, circle).fields(copy, WRITTEN_TEXT_FIELDS)

    return (
        _cpu_us(lambda: gate(bundle, forbidden_values=forbidden, circle=circle)),
        _cpu_us(lambda: identifier_kind(text, circle)),
        _cpu_us(mask),
    )


async def measure_gate(context_dsn: str) -> GateCost:
    """The gate's cost on L-2041-1's prompt bundles (see the module docstring)."""
    prepare()
    prepare_tokens()
    key = DEVELOPMENT_IDENTIFIER_KEY.encode()
    pool = await create_pool(context_dsn, max_size=1)
    whole = identifiers = masking = 0.0
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
            costs = _costs(bundle, record.linked_ids | {"L-2041-1"}, record.circle)
            whole, identifiers, masking = (
                total + cost
                for total, cost in zip((whole, identifiers, masking), costs, strict=True)
            )
    finally:
        await pool.close()
    count = len(PURPOSE_NAMES)
    return GateCost(whole / count + masking / count, identifiers / count, masking / count)
