"""What identifies one learner in the AI plane's stores: the traces an erasure removes and its
verification looks for.

- the learner id (audit resources ``learner:<id>``, approval arguments, the learner's rows);
- the learner's own platform account, when the child signs in (tokens bound to it, audit rows
  acting for it, rate-limit counters);
- the learner's ref, whose first 12 hex digits also start the refs written before refs widened,
  and so every snapshot key of the learner (``ai-context/<day>/<ref>/``);
- the refs its snapshots were written under before the pseudonym key was rotated, found through
  its data key: the digest rows of the snapshots sealed under it name them.

Where a learner must be named after erasure (the rights tables, the ledger), it is named by its
subject, a keyed digest (see :mod:`nemo_context.snapshots.keys`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from nemo_context.pseudonym import Pseudonymizer
from nemo_context.snapshots.keys import REF_DIGEST_WIDTH, MasterKey
from nemo_core.db import Connection
from nemo_core.retention import key_pattern, ref_pattern


def ref_groups(refs: Iterable[str]) -> tuple[tuple[str, ...], ...]:
    """``refs`` with the refs of 12 hex digits they start with (from before refs widened),
    grouped by those digits: one group per learner and pseudonym key, as a snapshot store
    lists them, in the order of ``refs``."""
    groups: dict[str, list[str]] = {}
    for ref in refs:
        group = groups.setdefault(ref[:REF_DIGEST_WIDTH], [ref[:REF_DIGEST_WIDTH]])
        if ref not in group:
            group.append(ref)
    return tuple(tuple(group) for group in groups.values())


@dataclass(frozen=True)
class LearnerTraces:
    """One learner as its traces appear in the stores."""

    learner_id: str
    subject: str
    ref: str
    account_ids: tuple[str, ...]
    earlier_refs: tuple[str, ...]
    """Refs its snapshots were written under with an earlier pseudonym key."""
    ref_digests: tuple[str, ...]
    """Keyed digests of its refs, one per :attr:`ref_groups` entry, the current ref's first."""

    @property
    def ref_prefix(self) -> str:
        """``nemo_`` and 12 hex digits: the start of every ref of this learner under the current
        pseudonym key."""
        return self.ref[:REF_DIGEST_WIDTH]

    @property
    def ref_groups(self) -> tuple[tuple[str, ...], ...]:
        """Every ref its snapshots may be stored under (see :func:`ref_groups`), the current
        ref's first."""
        return ref_groups((self.ref, *self.earlier_refs))

    @property
    def refs(self) -> tuple[str, ...]:
        """Every ref its snapshots may be stored under (see :attr:`ref_groups`)."""
        return tuple(ref for group in self.ref_groups for ref in group)

    @property
    def patterns(self) -> tuple[str, ...]:
        """Regular expressions that find a trace of the learner in any text: its id and own
        account as whole keys, each of its refs (either width) as a whole ref."""
        return (
            *(key_pattern(key) for key in self.user_ids),
            *(ref_pattern(ref, REF_DIGEST_WIDTH) for ref in (self.ref, *self.earlier_refs)),
        )

    @property
    def user_ids(self) -> tuple[str, ...]:
        """Ids the tool plane may hold for the learner itself: its id and its own account."""
        return (self.learner_id, *self.account_ids)


class Identities:
    """The two secrets that name a learner: the pseudonym key (refs) and the master key
    (subjects, ref digests)."""

    def __init__(self, master: MasterKey, pseudonyms: Pseudonymizer) -> None:
        self.master = master
        self.pseudonyms = pseudonyms

    def traces(
        self, learner_id: str, account_ids: tuple[str, ...], earlier_refs: Iterable[str] = ()
    ) -> LearnerTraces:
        ref = self.pseudonyms.learner_ref(learner_id)
        current = ref[:REF_DIGEST_WIDTH]
        earlier = tuple(sorted({found for found in earlier_refs if not found.startswith(current)}))
        heads = dict.fromkeys(found[:REF_DIGEST_WIDTH] for found in (ref, *earlier))
        return LearnerTraces(
            learner_id=learner_id,
            subject=self.master.subject(learner_id),
            ref=ref,
            account_ids=account_ids,
            earlier_refs=earlier,
            ref_digests=tuple(self.master.ref_digest(head) for head in heads),
        )

    def with_refs(self, traces: LearnerTraces, refs: Iterable[str]) -> LearnerTraces:
        """``traces`` with ``refs`` found elsewhere (in the snapshot store) as earlier refs."""
        return self.traces(traces.learner_id, traces.account_ids, (*traces.earlier_refs, *refs))

    async def read_traces(self, owner_conn: Connection, learner_id: str) -> LearnerTraces:
        """The traces of ``learner_id``: its own account read from the learner record, and the
        refs of every snapshot sealed under its data key (the owner's connection: both are
        read across row-level security)."""
        account = await owner_conn.fetchval(
            "SELECT user_id FROM learning.learners WHERE id = $1", learner_id
        )
        refs = await owner_conn.fetch(
            "SELECT DISTINCT s.learner_ref FROM learning.context_snapshots s"
            " JOIN learning.snapshot_keys k ON k.id = s.key_id WHERE k.subject = $1",
            self.master.subject(learner_id),
        )
        return self.traces(
            learner_id, (account,) if account else (), (row["learner_ref"] for row in refs)
        )
