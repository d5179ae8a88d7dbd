-- Learner data rights: per-learner snapshot keys, requests with their clocks, and blocks.
--
-- Nothing here holds a learner id. A learner is named by its subject: the HMAC-SHA256 of the id
-- under a key derived from the snapshot master key (the context service's secret), so these rows
-- survive an erasure without keeping a trace of the child, and the id cannot be recovered from
-- them by hashing candidate ids.

-- One data key per learner. Snapshots are AES-GCM encrypted with it; the key itself is stored
-- wrapped (AES-GCM under the master key, bound to its id). Deleting the row makes every copy of
-- the learner's snapshots unreadable: objects, noncurrent versions and backups of the bucket.
CREATE TABLE learning.snapshot_keys (
    subject    text PRIMARY KEY CHECK (subject ~ '^[0-9a-f]{64}$'),
    id         uuid NOT NULL UNIQUE,
    wrapped    bytea NOT NULL CHECK (octet_length(wrapped) BETWEEN 29 AND 256),
    created_at timestamptz NOT NULL DEFAULT now()
);
-- The context service creates and reads keys; only the owner (erasure, purge) deletes them.
GRANT SELECT, INSERT ON learning.snapshot_keys TO nemo_context;

-- Which key encrypted a snapshot; NULL for snapshots written in the clear before this migration.
-- Destroying a key removes the digests of its snapshots with it.
ALTER TABLE learning.context_snapshots
    ADD COLUMN key_id uuid REFERENCES learning.snapshot_keys (id) ON DELETE CASCADE;
CREATE INDEX context_snapshots_key_id_idx ON learning.context_snapshots (key_id);
CREATE INDEX context_snapshots_learner_ref_idx ON learning.context_snapshots (learner_ref);

CREATE SCHEMA rights;
COMMENT ON SCHEMA rights IS
    'Learner data rights: requests with their clocks, their audited steps, restrictions and '
    'erasure tombstones. Keyed by subject digests, never by learner id.';
REVOKE ALL ON SCHEMA rights FROM PUBLIC;
GRANT USAGE ON SCHEMA rights TO nemo_context;

-- A data subject's request: export (access), erasure or restriction of processing.
CREATE TABLE rights.requests (
    id              text PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{2,63}$'),
    kind            text NOT NULL CHECK (kind IN ('export', 'erasure', 'restriction')),
    subject         text NOT NULL CHECK (subject ~ '^[0-9a-f]{64}$'),
    -- Who asked (a platform user id: the parent, the learner, staff on a ticket) and through
    -- what (a caller identity, or the operator who entered it with the nemo command).
    requested_by    text NOT NULL,
    requested_via   text NOT NULL,
    state           text NOT NULL DEFAULT 'received' CHECK (state IN (
        'received', 'acknowledged', 'in_progress', 'completed', 'in_effect', 'lifted', 'failed'
    )),
    received_at     timestamptz NOT NULL,
    acknowledge_by  timestamptz NOT NULL,
    complete_by     timestamptz NOT NULL,
    acknowledged_at timestamptz,
    completed_at    timestamptz,
    -- The erasure receipt, or the export's manifest: counts per store, never values.
    receipt         jsonb,
    CHECK (acknowledge_by >= received_at AND complete_by >= received_at),
    CHECK ((state IN ('completed', 'lifted')) = (completed_at IS NOT NULL))
);
CREATE INDEX requests_subject_idx ON rights.requests (subject);
CREATE INDEX requests_open_idx ON rights.requests (complete_by)
    WHERE state NOT IN ('completed', 'lifted');

-- Every step of every request, in order: the audit trail privacy staff show a regulator.
CREATE TABLE rights.request_events (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    request_id text NOT NULL REFERENCES rights.requests (id) ON DELETE CASCADE,
    at         timestamptz NOT NULL DEFAULT now(),
    step       text NOT NULL,
    actor      text NOT NULL,
    detail     jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX request_events_request_idx ON rights.request_events (request_id, id);

-- Learners the AI plane may no longer process: restricted (until lifted) or erased (for good).
-- ref_digests are keyed digests of the learner's snapshot refs, so GetSnapshot can tell an
-- erased learner's snapshot from one that never existed without keeping the ref.
CREATE TABLE rights.blocks (
    subject     text PRIMARY KEY CHECK (subject ~ '^[0-9a-f]{64}$'),
    kind        text NOT NULL CHECK (kind IN ('restricted', 'erased')),
    request_id  text NOT NULL,
    ref_digests text[] NOT NULL DEFAULT '{}',
    since       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX blocks_ref_digests_idx ON rights.blocks USING gin (ref_digests);

-- The context service reads blocks on every build and answers GetSnapshot with them. Through
-- RightsService it records requests on a person's behalf, with their steps, and blocks the
-- learner of a restriction or an erasure at once; it deletes nothing here.
GRANT SELECT, INSERT, UPDATE ON rights.requests, rights.blocks TO nemo_context;
GRANT SELECT, INSERT ON rights.request_events TO nemo_context;
GRANT USAGE ON SEQUENCE rights.request_events_id_seq TO nemo_context;
