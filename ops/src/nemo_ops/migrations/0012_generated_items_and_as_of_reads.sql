-- Generated practice items join the knowledge item bank with their answer keys and rubrics, so
-- answers to them can be graded; the context service (the database's only reader and writer of
-- learner and knowledge data) stores them for the gateway, which never touches the database.
ALTER TABLE knowledge.items
    ADD COLUMN choices      text[] NOT NULL DEFAULT '{}',
    ADD COLUMN origin       text   NOT NULL DEFAULT 'curated'
        CHECK (origin IN ('curated', 'generated')),
    -- The prompt that generated the item, as "id@version"; NULL for curated items.
    ADD COLUMN generated_by text,
    ADD COLUMN created_at   timestamptz NOT NULL DEFAULT now(),
    ALTER COLUMN answer_key DROP NOT NULL,
    -- A generated item's difficulty is unknown until answers calibrate it: NULL, never a guess.
    ALTER COLUMN difficulty DROP NOT NULL,
    ADD CONSTRAINT items_curated_are_calibrated
        CHECK (origin = 'generated' OR (answer_key IS NOT NULL AND difficulty IS NOT NULL)),
    -- An item is marked by its key or, for open items, by its rubric.
    ADD CONSTRAINT items_can_be_marked CHECK (answer_key IS NOT NULL OR rubric <> ''),
    ADD CONSTRAINT items_generated_by_a_prompt
        CHECK ((origin = 'generated') = (generated_by IS NOT NULL));

GRANT INSERT (id, node_id, kind, stem, choices, answer_key, rubric, origin, generated_by)
    ON knowledge.items TO nemo_context;

-- A learner's age as of a given day, for bundles built for an evaluation time; like
-- learning.learner_age_years it returns whole years only, never the birth date.
CREATE FUNCTION learning.learner_age_years_on(p_learner_id text, p_day date) RETURNS integer
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT date_part('year', age(p_day, l.birth_date))::integer
    FROM learning.learners AS l
    WHERE l.id = p_learner_id
      AND l.id = ANY (string_to_array(current_setting('nemo.learner_ids', true), ','))
$$;

REVOKE ALL ON FUNCTION learning.learner_age_years_on(text, date) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION learning.learner_age_years_on(text, date) TO nemo_context;
