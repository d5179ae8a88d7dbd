-- An operator must see what a call would change before approving it, not only a digest of it.
-- arguments_json is the canonical JSON (sorted keys, no spaces) of the call's validated
-- arguments, kept as text so that its SHA-256 is exactly arguments_digest, and the check makes
-- sure of it: what an operator reads is what the approval is bound to. resource is what the
-- call is about ('learner:L-1'), NULL when the tool names none. Both stay NULL on approvals
-- requested before this migration. The audit log still never holds a call's input: only
-- approvals do, and only for calls that wait for a person.
ALTER TABLE toolplane.approvals
    ADD COLUMN arguments_json text,
    ADD COLUMN resource       text,
    ADD CONSTRAINT approvals_arguments_match_digest CHECK (
        arguments_json IS NULL
        OR encode(sha256(convert_to(arguments_json, 'UTF8')), 'hex') = arguments_digest
    );
