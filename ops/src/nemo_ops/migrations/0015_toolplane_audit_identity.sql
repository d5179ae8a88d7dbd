-- An audit row says which token made the call and where the user it acted for came from
-- ('token': bound to the token; 'caller': vouched for by an internal caller the tool plane trusts;
-- 'asserted': named by the agent itself, recorded but never a basis for access; 'none'). call_id
-- is made by the server for every call, so rows stay apart when agents reuse request ids.
-- input_ref names the snapshot of the learner data the call returned (read it with GetSnapshot):
-- what exactly the agent saw, without the log holding any of it. All stay NULL on older rows.
ALTER TABLE toolplane.audit_logs
    ADD COLUMN call_id     text,
    ADD COLUMN token_id    text,
    ADD COLUMN user_source text CHECK (user_source IN ('none', 'token', 'caller', 'asserted')),
    ADD COLUMN input_ref   text;
CREATE INDEX audit_logs_call_id_idx ON toolplane.audit_logs (call_id);
