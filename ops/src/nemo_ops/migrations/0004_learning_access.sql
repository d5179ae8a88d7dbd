-- What the context service (role nemo_context) may do with learner data. The tool plane's role
-- gets nothing here: learner data reaches agents only through the context service.

-- Column privileges: descriptive identifier columns and verbatim answers are not granted, so a
-- query that names them fails instead of leaking. Keys stay readable for binding and access
-- checks. Tables granted whole hold no identifier column.
GRANT SELECT (id, role, created_at) ON learning.users TO nemo_context;
GRANT SELECT (id, created_at) ON learning.families TO nemo_context;
GRANT SELECT (id, family_id, user_id, grade, created_at, updated_at)
    ON learning.learners TO nemo_context;
GRANT SELECT (id, learner_id, node_id, item_id, correct, reliability, created_at)
    ON learning.evidence TO nemo_context;
GRANT SELECT ON
    learning.family_members,
    learning.guardians,
    learning.mentor_assignments,
    learning.mastery,
    learning.goals,
    learning.retention,
    learning.learner_model_versions
TO nemo_context;

-- The conversation write path (finished turns, structured state, summaries).
GRANT SELECT, INSERT, UPDATE ON
    learning.chat_sessions,
    learning.chat_messages,
    learning.conversation_state
TO nemo_context;
-- Summaries are versioned: a new summary is a new row.
GRANT SELECT, INSERT ON learning.conversation_summaries TO nemo_context;

-- Row-level security: a transaction sees only the learners bound to it with
--     SELECT set_config('nemo.learner_ids', 'L-1', true)
-- (comma-separated ids, transaction-local), so a query that forgets its WHERE returns nothing of
-- another learner, and with nothing bound returns nothing. Writes must carry a bound learner too.
--
-- Access-check design: the check "may user U reach learner L" concerns exactly one learner, so it
-- runs in a transaction bound to L; guardians and mentor_assignments (learner-keyed) are then
-- readable for L only, which is all the check needs. users, families and family_members are
-- keyed by user and family, not by learner, and the context role sees only their keys, roles and
-- relations (names, emails and phones are withheld above), so they carry no learner policy.
--
-- FORCE subjects the table owner to row-level security too (with no policy of its own it would
-- see no rows), so only a role that bypasses RLS reads across learners: the owner that runs
-- migrations, seeds and the definer functions below (checked in 0001). Services never connect
-- as the owner.
DO $$
DECLARE
    table_name text;
    key_column text;
BEGIN
    FOR table_name, key_column IN
        SELECT t.name, CASE WHEN t.name = 'learners' THEN 'id' ELSE 'learner_id' END
        FROM unnest(ARRAY[
            'learners', 'guardians', 'mentor_assignments', 'mastery', 'evidence', 'goals',
            'retention', 'learner_model_versions', 'chat_sessions', 'chat_messages',
            'conversation_state', 'conversation_summaries'
        ]) AS t(name)
    LOOP
        EXECUTE format('ALTER TABLE learning.%I ENABLE ROW LEVEL SECURITY', table_name);
        EXECUTE format('ALTER TABLE learning.%I FORCE ROW LEVEL SECURITY', table_name);
        EXECUTE format(
            'CREATE POLICY bound_learners ON learning.%I FOR ALL TO nemo_context '
            'USING (%2$I = ANY (string_to_array(current_setting(''nemo.learner_ids'', true), '','')))'
            ' WITH CHECK (%2$I = ANY (string_to_array(current_setting(''nemo.learner_ids'', true), '','')))',
            table_name, key_column
        );
    END LOOP;
END
$$;

-- Age in whole years, never the birth date. Definer rights because nemo_context has no privilege
-- on birth_date; it answers only for a learner bound to the caller's transaction, so it cannot
-- be used to probe other learners. search_path is pinned so callers cannot substitute objects.
CREATE FUNCTION learning.learner_age_years(p_learner_id text) RETURNS integer
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT date_part('year', age(current_date, l.birth_date))::integer
    FROM learning.learners AS l
    WHERE l.id = p_learner_id
      AND l.id = ANY (string_to_array(current_setting('nemo.learner_ids', true), ','))
$$;

-- The learner a chat session belongs to: the conversation path starts from a session id and must
-- know which learner to bind before it can read anything else. Returns a key only.
CREATE FUNCTION learning.chat_session_learner(p_session_id text) RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT s.learner_id FROM learning.chat_sessions AS s WHERE s.id = p_session_id
$$;

-- Functions are executable by PUBLIC by default; definer functions must not be.
REVOKE ALL ON FUNCTION
    learning.learner_age_years(text),
    learning.chat_session_learner(text)
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    learning.learner_age_years(text),
    learning.chat_session_learner(text)
TO nemo_context;
