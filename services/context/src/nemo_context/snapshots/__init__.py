"""Context snapshots: the durable record of exactly what a bundle showed a model or an agent.

- :mod:`.store` — canonical JSON, keys, writing a snapshot and reading it back verified;
- :mod:`.objects` — where the bytes live: a local directory or an S3-compatible bucket;
- :mod:`.s3_puts` — a snapshot's PUT to S3, signed and sent without the client's pipeline;
- :mod:`.digests` — the SHA-256 rows in PostgreSQL, group-committed;
- :mod:`.reads` — GetSnapshot, for auditors;
- :mod:`.names` — snapshots written before the v1 field renames, read under the current names;
- :mod:`.retention` — how long snapshots are kept, and the purge.
"""
