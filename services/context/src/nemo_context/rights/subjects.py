"""What identifies one learner in the AI plane's stores: the traces an erasure removes and its
verification looks for.

- the learner id (audit resources ``learner:<id>``, approval arguments, the learner's rows);
- the learner's own platform account, when the child signs in (tokens bound to it, audit rows
  acting for it, rate-limit counters);
- the learner's ref, whose first 12 hex digits also start the refs written before refs widened,
  and so every snapshot key of the learner (``ai-context/<day>/<ref>/``).

Where a learner must be named after erasure (the rights tables, the ledger), it is named by its
subject, a keyed digest (see :mod:`nemo_context.snapshots.keys`).
"""

from __future__ import annotations

from dataclasses import dataclass

from nemo_context.pseudonym import Pseudonymizer
from nemo_context.snapshots.keys import REF_DIGEST_WIDTH, MasterKey
from nemo_core.db import Connection
from nemo_core.retention import key_pattern, ref_pattern


@dataclass(frozen=True)
class LearnerTraces:
    """One learner as its traces appear in the stores."""

    learner_id: str
    subject: str
    ref: str
    account_ids: tuple[str, ...]
    ref_digest: str

    @property
    def ref_prefix(self) -> str:
        """``nemo_`` and 12 hex digits: the start of every ref of this learner."""
        return self.ref[:REF_DIGEST_WIDTH]

    @property
    def patterns(self) -> tuple[str, ...]:
        """Regular expressions that find a trace of the learner in any text: its id and own
        account as whole keys, its ref (either width) as a whole ref."""
        return (
            *(key_pattern(key) for key in self.user_ids),
            ref_pattern(self.ref, REF_DIGEST_WIDTH),
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

    def traces(self, learner_id: str, account_ids: tuple[str, ...]) -> LearnerTraces:
        ref = self.pseudonyms.learner_ref(learner_id)
        return LearnerTraces(
            learner_id=learner_id,
            subject=self.master.subject(learner_id),
            ref=ref,
            account_ids=account_ids,
            ref_digest=self.master.ref_digest(ref),
        )

    async def read_traces(self, owner_conn: Connection, learner_id: str) -> LearnerTraces:
        """The traces of ``learner_id``, its own account read from the learner record (the
        owner's connection: the record is read across row-level security)."""
        account = await owner_conn.fetchval(
            "SELECT user_id FROM learning.learners WHERE id = $1", learner_id
        )
        return self.traces(learner_id, (account,) if account else ())
