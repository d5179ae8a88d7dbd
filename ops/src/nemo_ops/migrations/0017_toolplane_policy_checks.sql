-- Grants and policies that could never take effect are refused when they are written, with a
-- message that says what is wrong: an unknown risk level, mode, environment, effect or resource
-- scope, or conditions that are not a conditions object. A broken deny policy that "matches
-- nothing" is a hole nobody sees, so it must not be writable by mistake. The policy engine still
-- treats broken conditions as never matching, for rows written around these checks (before this
-- migration, or with the triggers disabled); `nemo policies check` reports such rows.

CREATE FUNCTION toolplane.conditions_problem(raw text) RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    value jsonb;
    item  text;
BEGIN
    IF raw IS NULL OR btrim(raw) = '' THEN
        RETURN NULL;
    END IF;
    BEGIN
        value := raw::jsonb;
    EXCEPTION WHEN others THEN
        RETURN 'conditions are not valid JSON';
    END;
    IF jsonb_typeof(value) <> 'object' THEN
        RETURN 'conditions must be a JSON object';
    END IF;
    FOR item IN SELECT jsonb_object_keys(value) LOOP
        IF item NOT IN ('risk_at_least', 'mode') THEN
            RETURN format('unknown condition %s (expected risk_at_least, mode)', to_jsonb(item));
        END IF;
    END LOOP;
    -- A null value constrains nothing, as for the policy engine.
    IF jsonb_typeof(value -> 'risk_at_least') IS DISTINCT FROM 'null'
        AND value ? 'risk_at_least' AND (jsonb_typeof(value -> 'risk_at_least') <> 'string'
        OR value ->> 'risk_at_least' NOT IN ('LOW', 'MEDIUM', 'HIGH', 'CRITICAL')) THEN
        RETURN format('unknown risk level %s (expected LOW, MEDIUM, HIGH, CRITICAL)',
                      value -> 'risk_at_least');
    END IF;
    IF jsonb_typeof(value -> 'mode') IS DISTINCT FROM 'null'
        AND value ? 'mode' AND (jsonb_typeof(value -> 'mode') <> 'string'
        OR value ->> 'mode' NOT IN ('read', 'write')) THEN
        RETURN format('unknown mode %s (expected read, write)', value -> 'mode');
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION toolplane.environment_scope_problem(scope text) RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT format('unknown environment %s (expected *, development, staging, production)',
                  to_jsonb(btrim(item)))
    FROM unnest(string_to_array(scope, ',')) AS item
    WHERE btrim(item) NOT IN ('*', 'development', 'staging', 'production')
    LIMIT 1
$$;

CREATE FUNCTION toolplane.check_grant() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    problem text;
BEGIN
    IF NEW.permission IS DISTINCT FROM 'read' AND NEW.permission IS DISTINCT FROM 'write' THEN
        problem := format('unknown mode %s (expected read, write)', to_jsonb(NEW.permission));
    ELSIF NEW.resource_scope !~
        '^\s*(\*|user|(learner|family):[^,\s]+(\s*,\s*(learner|family):[^,\s]+)*)\s*$' THEN
        problem := format('unknown resource scope %s (expected *, user, or learner:<id> and '
                          'family:<id> entries)', to_jsonb(NEW.resource_scope));
    ELSE
        problem := toolplane.environment_scope_problem(NEW.environment_scope);
    END IF;
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'grant of % for %: %', NEW.agent_id, NEW.tool_pattern, problem
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END
$$;

CREATE FUNCTION toolplane.check_policy() RETURNS trigger
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
                            toolplane.environment_scope_problem(NEW.environment_scope));
    END IF;
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'policy %: %', NEW.name, problem USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER grants_check
    BEFORE INSERT OR UPDATE ON toolplane.grants
    FOR EACH ROW EXECUTE FUNCTION toolplane.check_grant();

CREATE TRIGGER policies_check
    BEFORE INSERT OR UPDATE ON toolplane.policies
    FOR EACH ROW EXECUTE FUNCTION toolplane.check_policy();

REVOKE ALL ON FUNCTION toolplane.conditions_problem(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION toolplane.environment_scope_problem(text) FROM PUBLIC;
-- The triggers run as whoever writes the row, and the tool plane's role writes grants too.
GRANT EXECUTE ON FUNCTION toolplane.conditions_problem(text),
    toolplane.environment_scope_problem(text) TO nemo_toolplane;
REVOKE ALL ON FUNCTION toolplane.check_grant() FROM PUBLIC;
REVOKE ALL ON FUNCTION toolplane.check_policy() FROM PUBLIC;
