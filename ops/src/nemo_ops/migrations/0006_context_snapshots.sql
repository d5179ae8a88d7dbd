-- The digest of every stored context snapshot. The snapshot object itself lives in S3 (or a local
-- directory); its SHA-256 is recorded here, in a different system, so an object altered after it
-- was written no longer matches and reading it fails instead of returning altered evidence.
-- Keyed by the pseudonym only: nothing here names a learner, so no row-level security applies.
CREATE TABLE learning.context_snapshots (
    input_ref   text PRIMARY KEY CHECK (
        input_ref ~ '^ai-context/[0-9]{4}-[0-9]{2}-[0-9]{2}/nemo_[0-9a-f]{12}/[0-9a-f-]{36}\.json$'
    ),
    learner_ref text NOT NULL CHECK (learner_ref ~ '^nemo_[0-9a-f]{12}$'),
    sha256      text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    size_bytes  integer NOT NULL CHECK (size_bytes > 0),
    created_at  timestamptz NOT NULL DEFAULT now()
);
-- Retention purges by age.
CREATE INDEX context_snapshots_created_at_idx ON learning.context_snapshots (created_at);

-- The context service records digests and reads them back; only the owner (the purge command)
-- deletes them, so a compromised service cannot erase the record of what a model saw.
GRANT SELECT, INSERT ON learning.context_snapshots TO nemo_context;
