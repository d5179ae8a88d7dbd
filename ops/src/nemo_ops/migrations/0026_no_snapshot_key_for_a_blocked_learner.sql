-- No snapshot key is created or handed out for a blocked learner (restricted or erased).
--
-- Every replica refuses a blocked learner's builds within seconds, but a build that passed that
-- check just before may still be under way. Were it to create the learner's key again after an
-- erasure destroyed it, it would write a snapshot that opens, which nothing would erase. The
-- context service asks for a key with an INSERT ... ON CONFLICT DO NOTHING that returns the
-- stored row (`nemo_context.snapshots.keys`); a BEFORE INSERT trigger fires for that proposed
-- row even when the key exists, so the refusal covers creating and reading alike.
CREATE FUNCTION learning.refuse_key_of_blocked_learner() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF EXISTS (SELECT FROM rights.blocks WHERE subject = NEW.subject) THEN
        RAISE EXCEPTION 'no snapshot key for a blocked learner'
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER snapshot_keys_not_for_blocked_learners
    BEFORE INSERT ON learning.snapshot_keys
    FOR EACH ROW EXECUTE FUNCTION learning.refuse_key_of_blocked_learner();
REVOKE ALL ON FUNCTION learning.refuse_key_of_blocked_learner() FROM PUBLIC;
