-- A policy's resource scope is matched against what a call is about ("learner:L-2041-1", or
-- nothing), so "family:F-1" or "user" in it could never match: a deny policy written that way
-- denied nothing. Such scopes are refused when written, like the other rows that could never
-- match (0017). A policy names learners ("learner:<id>", globs allowed) or "*"; to keep an
-- agent away from a family, narrow its grants instead. `nemo policies check` reports rows
-- written before this.
CREATE FUNCTION toolplane.policy_resource_scope_problem(scope text) RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT format('resource scope %s can never match (a policy names "*" or learner:<id> '
                  'entries; family and user scopes belong to grants)', to_jsonb(btrim(item)))
    -- An empty scope is one empty item (string_to_array would make it none), and matches nothing.
    FROM unnest(CASE WHEN scope = '' THEN ARRAY[''] ELSE string_to_array(scope, ',') END) AS item
    WHERE btrim(item) <> '*' AND btrim(item) !~ '^learner:[\x21-\x7e]+$'
    LIMIT 1
$$;

CREATE OR REPLACE FUNCTION toolplane.check_policy() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    problem text;
BEGIN
    IF NEW.effect IS DISTINCT FROM 'deny' AND NEW.effect IS DISTINCT FROM 'require_approval' THEN
        problem := format('unknown effect %s (expected deny, require_approval)',
                          to_jsonb(NEW.effect));
    ELSE
        problem := coalesce(toolplane.conditions_problem(NEW.conditions),
                            toolplane.environment_scope_problem(NEW.environment_scope),
                            toolplane.policy_resource_scope_problem(NEW.resource_scope));
    END IF;
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'policy %: %', NEW.name, problem USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END
$$;

REVOKE ALL ON FUNCTION toolplane.policy_resource_scope_problem(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION toolplane.policy_resource_scope_problem(text) TO nemo_toolplane;
