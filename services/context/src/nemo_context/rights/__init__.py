"""Learner data rights: what is kept and for how long, and a family's export, erasure and
restriction requests.

- :mod:`.retention` — the retention table: every store that holds something about a learner;
- :mod:`.subjects` — how a learner is named where its id must not stay (subject digests) and
  the traces erasure removes (id, own account, refs);
- :mod:`.requests` — requests with their clocks and their audited steps;
- :mod:`.blocks` — restricted and erased learners, refused by every build;
- :mod:`.ledger` — the erasure ledger, kept beside the snapshots so a restore cannot lose it;
- :mod:`.learning` — the context service's stores of one learner: export, erase, count, purge.
"""
