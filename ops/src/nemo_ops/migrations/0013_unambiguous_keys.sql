-- Keys of learners, families and users never leave the context service: its identifier gate
-- looks for them in every string it returns. It can do so without false alarms only when a key
-- cannot also be ordinary text ('8' is in "lớp 8", '35' in "35%", 'F-1' in "Lực F-1"), so keys are
-- 8 to 128 ASCII letters, digits or . _ : -, starting with a letter or a digit, with at least one
-- letter and one digit. The rule is nemo_context.ids; this check repeats it where keys are written.
CREATE FUNCTION learning.is_unambiguous_key(key text) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN key ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{7,127}$' AND key ~ '[A-Za-z]' AND key ~ '[0-9]';
-- Only the owner's checks call it.
REVOKE ALL ON FUNCTION learning.is_unambiguous_key(text) FROM PUBLIC;

-- Existing keys that break the rule stop the migration with a count and what to do, rather than a
-- bare constraint violation naming one row.
DO $$
DECLARE
    plain bigint;
BEGIN
    SELECT (SELECT count(*) FROM learning.users WHERE NOT learning.is_unambiguous_key(id))
         + (SELECT count(*) FROM learning.families WHERE NOT learning.is_unambiguous_key(id))
         + (SELECT count(*) FROM learning.learners WHERE NOT learning.is_unambiguous_key(id))
    INTO plain;
    IF plain > 0 THEN
        RAISE EXCEPTION '% user, family or learner keys are too short or too plain for the identifier gate', plain
            USING HINT = 'Re-key them (8 to 128 letters, digits or . _ : -, with a letter and a digit) and migrate again.';
    END IF;
END
$$;

ALTER TABLE learning.users
    ADD CONSTRAINT users_id_unambiguous CHECK (learning.is_unambiguous_key(id));
ALTER TABLE learning.families
    ADD CONSTRAINT families_id_unambiguous CHECK (learning.is_unambiguous_key(id));
ALTER TABLE learning.learners
    ADD CONSTRAINT learners_id_unambiguous CHECK (learning.is_unambiguous_key(id));
