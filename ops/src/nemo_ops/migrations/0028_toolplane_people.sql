-- Every administrative action is a named person's (issue 26). An operator, or a person signed in
-- at the platform's authorization server, is recorded on what they do: who issued and revoked
-- each agent token, who created each grant, who mapped each OAuth client, and one row per call
-- of the people's API in admin_actions.
ALTER TABLE toolplane.agent_tokens
    ADD COLUMN issued_by  text,
    ADD COLUMN revoked_by text;
ALTER TABLE toolplane.grants ADD COLUMN created_by text;
ALTER TABLE toolplane.oauth_clients ADD COLUMN added_by text;

-- Approvals get a time to decide: a request still pending at decide_by is denied, instead of
-- waiting unseen until it expires. NULL (requests from before) means the expiry.
ALTER TABLE toolplane.approvals ADD COLUMN decide_by timestamptz;
ALTER TABLE toolplane.approvals
    DROP CONSTRAINT approvals_status_check,
    ADD CONSTRAINT approvals_status_check CHECK (
        status IN ('pending', 'approved', 'rejected', 'consumed', 'expired', 'denied')
    );
-- Guardians see the approvals about their child.
CREATE INDEX approvals_resource_idx
    ON toolplane.approvals (resource, created_at DESC) WHERE resource IS NOT NULL;

-- Who decides the approvals a policy requires: operators, and the learner's guardians when the
-- policy says so. A change of approvers is a change of substance: the policy's version moves.
ALTER TABLE toolplane.policies
    ADD COLUMN approvers text NOT NULL DEFAULT 'operator'
        CHECK (approvers IN ('operator', 'operator,guardian'));

CREATE OR REPLACE FUNCTION toolplane.bump_policy_version() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF (NEW.name, NEW.effect, NEW.agent_scope, NEW.tool_scope, NEW.resource_scope,
        NEW.environment_scope, NEW.conditions, NEW.priority, NEW.enabled, NEW.approvers)
       IS DISTINCT FROM
       (OLD.name, OLD.effect, OLD.agent_scope, OLD.tool_scope, OLD.resource_scope,
        OLD.environment_scope, OLD.conditions, OLD.priority, OLD.enabled, OLD.approvers)
    THEN
        NEW.version := OLD.version + 1;
        NEW.updated_at := now();
    END IF;
    RETURN NEW;
END
$$;

-- Hosts (OAuth clients) a person took back: their access tokens for that person are refused,
-- whenever they were issued. Tool plane processes drop what they keep in memory on a change.
CREATE TABLE toolplane.host_revocations (
    user_id    text NOT NULL,
    client_id  text NOT NULL,
    revoked_at timestamptz NOT NULL DEFAULT now(),
    revoked_by text NOT NULL,
    PRIMARY KEY (user_id, client_id)
);
GRANT SELECT, INSERT ON toolplane.host_revocations TO nemo_toolplane;
CREATE TRIGGER host_revocations_notify_access
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON toolplane.host_revocations
    FOR EACH STATEMENT EXECUTE FUNCTION toolplane.notify_access_changed();

-- One row per call of the people's API by an authenticated person, whatever its outcome. The
-- tool plane's role may only append.
CREATE TABLE toolplane.admin_actions (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    "timestamp"     timestamptz NOT NULL DEFAULT now(),
    -- The operator id, or the platform user id of a person who is no operator.
    person          text NOT NULL,
    operator_id     text,
    user_id         text,
    credential_kind text NOT NULL CHECK (credential_kind IN ('operator_token', 'oauth')),
    -- The operator token's id, or the access token's jti.
    credential_id   text,
    -- The service caller the person came through (console, operator).
    caller          text NOT NULL,
    action          text NOT NULL,
    target          text NOT NULL DEFAULT '',
    -- "ok", or the reason of the error the call got.
    outcome         text NOT NULL,
    details         jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX admin_actions_person_idx ON toolplane.admin_actions (person, "timestamp" DESC);
GRANT SELECT, INSERT ON toolplane.admin_actions TO nemo_toolplane;
GRANT USAGE ON SEQUENCE toolplane.admin_actions_id_seq TO nemo_toolplane;

-- The console's audit search pages newest first (by id) under one filter at a time; each filter
-- has an index in that order, so a page reads its rows and no others, at any size of the log.
CREATE INDEX audit_logs_user_idx ON toolplane.audit_logs (user_id, id DESC);
CREATE INDEX audit_logs_resource_idx ON toolplane.audit_logs (resource, id DESC);
CREATE INDEX audit_logs_tool_idx ON toolplane.audit_logs (tool_id, id DESC);
CREATE INDEX audit_logs_decision_idx ON toolplane.audit_logs (decision, id DESC);
CREATE INDEX audit_logs_agent_id_idx ON toolplane.audit_logs (agent_id, id DESC);
CREATE INDEX audit_logs_timestamp_idx ON toolplane.audit_logs ("timestamp");
-- The hosts that acted for a person.
CREATE INDEX audit_logs_subject_idx
    ON toolplane.audit_logs (subject, client_id) WHERE subject IS NOT NULL;
