-- The tool plane's own data. No foreign key reaches into learning: user ids here are opaque
-- references, and the tool plane's role must not depend on learner tables in any way.

-- Systems of the platform that agents can reason about (the application registry).
CREATE TABLE toolplane.applications (
    id                     text PRIMARY KEY,
    name                   text NOT NULL,
    domain                 text NOT NULL,
    repository             text NOT NULL,
    repository_path        text NOT NULL,  -- path inside the monorepo
    environment            text NOT NULL,
    owner                  text NOT NULL,
    status                 text NOT NULL CHECK (
        status IN ('active', 'maintenance', 'deprecated', 'retired')
    ),
    description            text NOT NULL DEFAULT '',
    architecture_reference text,
    database               text,
    deployment_target      text,
    metadata               jsonb NOT NULL DEFAULT '{}',
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now()
);

-- Projection of the tool registry, which lives in code; reconciled by a sync command.
CREATE TABLE toolplane.tools (
    id           text PRIMARY KEY,  -- 'learner.get_profile:v1'
    name         text NOT NULL,
    version      integer NOT NULL CHECK (version > 0),
    description  text NOT NULL,
    category     text NOT NULL,
    risk         text NOT NULL CHECK (risk IN ('LOW', 'MEDIUM', 'HIGH', 'CRITICAL')),
    mode         text NOT NULL CHECK (mode IN ('read', 'write')),
    input_schema jsonb NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (name, version),
    CHECK (id = name || ':v' || version)
);

CREATE TABLE toolplane.agents (
    id          text PRIMARY KEY,
    name        text NOT NULL,
    description text NOT NULL DEFAULT '',
    status      text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'disabled')),
    -- Legacy single token, not bound to a user: SHA-256 hex, NULL until one is issued.
    token_hash  text UNIQUE CHECK (token_hash ~ '^[0-9a-f]{64}$'),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Tokens are stored only as SHA-256 hex. A token bound to a user acts for that user only.
CREATE TABLE toolplane.agent_tokens (
    id         text PRIMARY KEY DEFAULT gen_random_uuid()::text,
    agent_id   text NOT NULL REFERENCES toolplane.agents (id) ON DELETE CASCADE,
    token_hash text NOT NULL UNIQUE CHECK (token_hash ~ '^[0-9a-f]{64}$'),
    user_id    text,
    label      text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz,
    revoked_at timestamptz
);
CREATE INDEX agent_tokens_agent_id_idx ON toolplane.agent_tokens (agent_id);

CREATE TABLE toolplane.grants (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    agent_id          text NOT NULL REFERENCES toolplane.agents (id) ON DELETE CASCADE,
    -- Versioned id ('learner.get_profile:v1'), bare name, or glob ('learner.*').
    tool_pattern      text NOT NULL,
    -- '*', 'user', 'learner:L-1,learner:L-2' or 'family:F-1'.
    resource_scope    text NOT NULL,
    environment_scope text NOT NULL DEFAULT '*',
    permission        text NOT NULL CHECK (permission IN ('read', 'write')),
    created_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (agent_id, tool_pattern, resource_scope, environment_scope)
);

CREATE TABLE toolplane.policies (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name              text NOT NULL UNIQUE,
    description       text NOT NULL DEFAULT '',
    effect            text NOT NULL CHECK (effect IN ('deny', 'require_approval')),
    agent_scope       text NOT NULL DEFAULT '*',
    tool_scope        text NOT NULL DEFAULT '*',
    resource_scope    text NOT NULL DEFAULT '*',
    environment_scope text NOT NULL DEFAULT '*',
    -- JSON such as {"risk_at_least": "HIGH", "mode": "write"}. Deliberately text, not jsonb:
    -- broken JSON can be stored, and the policy engine must then treat the policy as not matching.
    conditions        text,
    priority          integer NOT NULL DEFAULT 100,
    enabled           boolean NOT NULL DEFAULT true,
    -- Bumped on every change of substance, so approvals bound to a version go stale.
    version           integer NOT NULL DEFAULT 1 CHECK (version > 0),
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION toolplane.bump_policy_version() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF (NEW.name, NEW.effect, NEW.agent_scope, NEW.tool_scope, NEW.resource_scope,
        NEW.environment_scope, NEW.conditions, NEW.priority, NEW.enabled)
       IS DISTINCT FROM
       (OLD.name, OLD.effect, OLD.agent_scope, OLD.tool_scope, OLD.resource_scope,
        OLD.environment_scope, OLD.conditions, OLD.priority, OLD.enabled)
    THEN
        NEW.version := OLD.version + 1;
        NEW.updated_at := now();
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER policies_bump_version
    BEFORE UPDATE ON toolplane.policies
    FOR EACH ROW EXECUTE FUNCTION toolplane.bump_policy_version();

-- One row per authenticated call, whatever its outcome. Never the call's input or output: only
-- identifiers of the resource ('learner:L-1') and the error code.
CREATE TABLE toolplane.audit_logs (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    request_id  text NOT NULL,
    "timestamp" timestamptz NOT NULL DEFAULT now(),
    agent_id    text NOT NULL,  -- no foreign key: the record outlives the agent
    session_id  text,
    user_id     text,
    tool_id     text NOT NULL,  -- resolved versioned id, or the requested name when unknown
    resource    text,
    decision    text NOT NULL CHECK (decision IN ('allow', 'deny', 'require_approval')),
    status      text NOT NULL CHECK (status IN (
        'success', 'denied', 'approval_required', 'invalid', 'not_found', 'error'
    )),
    error_code  text CHECK (error_code IN (
        'AUTHENTICATION_ERROR', 'AUTHORIZATION_ERROR', 'RESOURCE_NOT_FOUND', 'VALIDATION_ERROR',
        'CONFLICT', 'RATE_LIMITED', 'DEPENDENCY_ERROR', 'INTERNAL_ERROR', 'POLICY_DENIED',
        'APPROVAL_REQUIRED'
    )),
    duration_ms double precision CHECK (duration_ms >= 0),
    environment text NOT NULL,
    metadata    jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_logs_request_id_idx ON toolplane.audit_logs (request_id);
CREATE INDEX audit_logs_agent_time_idx ON toolplane.audit_logs (agent_id, "timestamp" DESC);

-- A call that needs a person's approval, bound to everything that made it: agent, user, tool
-- version, a digest of the arguments and the policy version. Approved once, consumed once.
CREATE TABLE toolplane.approvals (
    id               text PRIMARY KEY DEFAULT gen_random_uuid()::text,
    agent_id         text NOT NULL REFERENCES toolplane.agents (id) ON DELETE CASCADE,
    user_id          text,
    tool_id          text NOT NULL,  -- versioned id
    arguments_digest text NOT NULL CHECK (arguments_digest ~ '^[0-9a-f]{64}$'),
    policy_name      text,           -- NULL when a hard rule (CRITICAL risk) required it
    policy_version   text NOT NULL,
    status           text NOT NULL DEFAULT 'pending' CHECK (
        status IN ('pending', 'approved', 'rejected', 'consumed', 'expired')
    ),
    request_id       text NOT NULL,
    expires_at       timestamptz NOT NULL,
    decided_by       text,
    decided_at       timestamptz,
    decision_note    text,
    consumed_at      timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    CHECK (status NOT IN ('approved', 'rejected', 'consumed')
           OR (decided_by IS NOT NULL AND decided_at IS NOT NULL)),
    CHECK ((status = 'consumed') = (consumed_at IS NOT NULL))
);
CREATE INDEX approvals_call_idx
    ON toolplane.approvals (agent_id, tool_id, arguments_digest, status);
CREATE INDEX approvals_status_idx ON toolplane.approvals (status, expires_at);

-- The tool plane's role: everything it needs here and nothing anywhere else. The audit log is
-- append-only for it; registry rows it reconciles (tools) or administers (grants, policies) may
-- be deleted.
GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA toolplane TO nemo_toolplane;
REVOKE UPDATE ON toolplane.audit_logs FROM nemo_toolplane;
GRANT DELETE ON toolplane.tools, toolplane.grants, toolplane.policies TO nemo_toolplane;
GRANT USAGE ON ALL SEQUENCES IN SCHEMA toolplane TO nemo_toolplane;
REVOKE ALL ON FUNCTION toolplane.bump_policy_version() FROM PUBLIC;
