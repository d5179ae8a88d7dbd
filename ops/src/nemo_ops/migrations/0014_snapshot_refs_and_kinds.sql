-- Learner refs widen from 12 to 24 hex digits (48 to 96 bits), so two learners practically never
-- share one. Snapshots written with 12-digit refs stay valid rows: both widths are accepted.
ALTER TABLE learning.context_snapshots
    DROP CONSTRAINT context_snapshots_input_ref_check,
    DROP CONSTRAINT context_snapshots_learner_ref_check;
ALTER TABLE learning.context_snapshots
    ADD CONSTRAINT context_snapshots_input_ref_check CHECK (
        input_ref ~ '^ai-context/[0-9]{4}-[0-9]{2}-[0-9]{2}/nemo_([0-9a-f]{24}|[0-9a-f]{12})/[0-9a-f-]{36}\.json$'
    ),
    ADD CONSTRAINT context_snapshots_learner_ref_check CHECK (
        learner_ref ~ '^nemo_([0-9a-f]{24}|[0-9a-f]{12})$'
    );

-- What a snapshot holds: a BuildContext bundle or a conversation bundle (BuildConversationContext),
-- so GetSnapshot parses it back as what it was. Rows from before were all BuildContext bundles.
ALTER TABLE learning.context_snapshots
    ADD COLUMN kind text NOT NULL DEFAULT 'context' CHECK (kind IN ('context', 'conversation'));
