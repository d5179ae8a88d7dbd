-- The tools projection carries everything an operator reads about a tool, not only its input:
-- the output schema, the input field naming a learner, and the client hints derived from mode
-- and risk. `nemo sync-tools` fills them from the code registry.
ALTER TABLE toolplane.tools
    ADD COLUMN output_schema    jsonb,
    ADD COLUMN learner_id_field text,
    ADD COLUMN annotations      jsonb NOT NULL DEFAULT '{}';

-- One pending approval per bound call: an agent repeating a call that waits for approval gets the
-- same request back instead of flooding operators with copies (user_id may be NULL, hence the
-- coalesce).
CREATE UNIQUE INDEX approvals_one_pending_per_call
    ON toolplane.approvals (agent_id, coalesce(user_id, ''), tool_id, arguments_digest,
                            policy_version)
    WHERE status = 'pending';

-- Operators list approvals newest first, a page at a time.
CREATE INDEX approvals_created_idx ON toolplane.approvals (created_at DESC, id DESC);
