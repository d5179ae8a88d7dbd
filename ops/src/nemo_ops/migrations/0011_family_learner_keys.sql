-- The identifier gate must also stop the keys of a learner's siblings (their learner ids and
-- their own user accounts): text about one child can name another of the same family. Row-level
-- security hides those learners from the context role, so a definer function returns their keys,
-- and only their keys, for a learner bound to the caller's transaction (like learner_age_years).
CREATE FUNCTION learning.family_learner_keys(p_learner_id text) RETURNS text[]
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(array_agg(DISTINCT k.key), '{}')
    FROM learning.learners AS l
    JOIN learning.learners AS s ON s.family_id = l.family_id AND s.id <> l.id
    CROSS JOIN LATERAL (VALUES (s.id), (s.user_id)) AS k(key)
    WHERE l.id = p_learner_id
      AND l.id = ANY (string_to_array(current_setting('nemo.learner_ids', true), ','))
      AND k.key IS NOT NULL
$$;

REVOKE ALL ON FUNCTION learning.family_learner_keys(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION learning.family_learner_keys(text) TO nemo_context;
