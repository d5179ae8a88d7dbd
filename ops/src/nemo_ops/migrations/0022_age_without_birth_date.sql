-- Age in whole years as of the server's date, and nothing else. The former
-- learning.learner_age_years_on(id, day) answered for any day a caller chose, so bisecting the day
-- recovered the birth date in about ten calls, and it answered negative ages for days before the
-- birth. Bundles built for a past or future evaluation time now carry the age as of today: the
-- age a model may know is the learner's current age, and no choice of time tells more.
DROP FUNCTION learning.learner_age_years_on(text, date);

-- A birth date after today is a data error: no age rather than a negative one.
CREATE OR REPLACE FUNCTION learning.learner_age_years(p_learner_id text) RETURNS integer
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT date_part('year', age(current_date, l.birth_date))::integer
    FROM learning.learners AS l
    WHERE l.id = p_learner_id
      AND l.id = ANY (string_to_array(current_setting('nemo.learner_ids', true), ','))
      AND l.birth_date <= current_date
$$;
