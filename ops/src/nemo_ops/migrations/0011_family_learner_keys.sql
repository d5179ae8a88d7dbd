-- The identifier gate must also stop the keys of a learner's siblings (their learner ids and
-- their own user accounts): text about one child can name another of the same family. Row-level
-- security hides those learners from the context role, so this view, which runs with its
-- owner's rights, returns their keys, and only their keys, for the learners bound to the
-- caller's transaction. A view rather than a definer function: the planner inlines it into the
-- bundle statement, where a function call would cost every build its own plan.
CREATE VIEW learning.family_learner_keys WITH (security_barrier) AS
    SELECT l.id AS learner_id, k.key
    FROM learning.learners AS l
    JOIN learning.learners AS s ON s.family_id = l.family_id AND s.id <> l.id
    CROSS JOIN LATERAL (VALUES (s.id), (s.user_id)) AS k(key)
    WHERE l.id = ANY (string_to_array(current_setting('nemo.learner_ids', true), ','))
      AND k.key IS NOT NULL;

GRANT SELECT ON learning.family_learner_keys TO nemo_context;
