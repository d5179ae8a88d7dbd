-- Approvals are decided by people who proved who they are, and bound to the token that made the
-- call as well as to its agent, user, tool, arguments, policy and expiry.
--
-- An operator is a person with credentials of their own, issued and revoked like agent tokens and
-- stored only as SHA-256. user_id links the operator to their account on the platform, so nobody
-- approves a call made on their own behalf.
CREATE TABLE toolplane.operators (
    id         text PRIMARY KEY CHECK (id ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
    name       text NOT NULL DEFAULT '',
    user_id    text,
    status     text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'disabled')),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE toolplane.operator_tokens (
    id          text PRIMARY KEY DEFAULT gen_random_uuid()::text,
    operator_id text NOT NULL REFERENCES toolplane.operators (id) ON DELETE CASCADE,
    token_hash  text NOT NULL UNIQUE CHECK (token_hash ~ '^[0-9a-f]{64}$'),
    label       text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz,
    revoked_at  timestamptz
);
CREATE INDEX operator_tokens_operator_idx ON toolplane.operator_tokens (operator_id);

-- The token of the call (NULL for an agent's legacy token) and where its user came from are part
-- of what an approval is bound to; decided_by_token names the credential that decided. Older
-- approvals keep NULL and match only calls with no token id and an unknown user source, i.e. none.
ALTER TABLE toolplane.approvals
    ADD COLUMN token_id         text,
    ADD COLUMN user_source      text CHECK (user_source IN ('none', 'token', 'caller', 'asserted')),
    ADD COLUMN decided_by_token text;

DROP INDEX toolplane.approvals_one_pending_per_call;
CREATE UNIQUE INDEX approvals_one_pending_per_call
    ON toolplane.approvals (agent_id, coalesce(user_id, ''), coalesce(token_id, ''),
                            coalesce(user_source, ''), tool_id, arguments_digest, policy_version)
    WHERE status = 'pending';
-- Approval requests are rate limited per agent and user: counted over recent requests.
CREATE INDEX approvals_requester_idx
    ON toolplane.approvals (agent_id, coalesce(user_id, ''), created_at DESC);

GRANT SELECT ON toolplane.operators, toolplane.operator_tokens TO nemo_toolplane;
