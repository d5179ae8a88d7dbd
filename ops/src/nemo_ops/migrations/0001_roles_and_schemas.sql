-- Roles and schemas.
--
-- Ownership: every object is owned by the role that runs the migrations (the "owner"). The
-- services never connect as the owner; they use the two roles below, which own nothing.
--
-- The owner must bypass row-level security (superuser, or a role created WITH BYPASSRLS): RLS is
-- forced on learner-keyed tables, so the definer functions of 0003 and the demo seed would
-- otherwise see no rows. Checked here so a wrong setup fails loudly instead of returning nothing.
DO $$
BEGIN
    IF NOT (SELECT rolsuper OR rolbypassrls FROM pg_catalog.pg_roles WHERE rolname = current_user)
    THEN
        RAISE EXCEPTION 'role % must be a superuser or have BYPASSRLS to run Nemo migrations',
            current_user;
    END IF;
END
$$;

-- Roles are cluster-wide while migrations run per database, so two databases of one cluster may
-- create them at the same moment: a concurrent duplicate is not an error.
DO $$
DECLARE
    role_name text;
BEGIN
    FOREACH role_name IN ARRAY ARRAY['nemo_context', 'nemo_toolplane'] LOOP
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = role_name) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I LOGIN', role_name);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL;
            END;
        END IF;
        -- A role created earlier by an administrator may be NOLOGIN. Altered only when needed:
        -- concurrent ALTER ROLE on one role fails with "tuple concurrently updated".
        IF NOT (SELECT rolcanlogin FROM pg_catalog.pg_roles WHERE rolname = role_name) THEN
            EXECUTE format('ALTER ROLE %I LOGIN', role_name);
        END IF;
        -- The whole access model rests on these roles being subject to privileges and RLS.
        IF (SELECT rolsuper OR rolbypassrls FROM pg_catalog.pg_roles WHERE rolname = role_name)
        THEN
            RAISE EXCEPTION 'role % must not be a superuser nor bypass row-level security',
                role_name;
        END IF;
    END LOOP;
END
$$;

-- PostgreSQL 15+ already withholds CREATE on public; older clusters and restored dumps may not.
REVOKE CREATE ON SCHEMA public FROM PUBLIC;

CREATE SCHEMA learning;
COMMENT ON SCHEMA learning IS
    'Learner data. Read only by the context service (role nemo_context), with column privileges '
    'and row-level security.';

CREATE SCHEMA knowledge;
COMMENT ON SCHEMA knowledge IS 'Curriculum knowledge graph and items. Read by the context service.';

CREATE SCHEMA toolplane;
COMMENT ON SCHEMA toolplane IS
    'Agents, tokens, grants, policies, tool registry projection, audit log and approvals. '
    'Used only by the tool plane (role nemo_toolplane).';

-- New schemas grant nothing to PUBLIC; revoking states the intent and survives a changed default.
REVOKE ALL ON SCHEMA learning, knowledge, toolplane FROM PUBLIC;

GRANT USAGE ON SCHEMA learning, knowledge TO nemo_context;
GRANT USAGE ON SCHEMA toolplane TO nemo_toolplane;
