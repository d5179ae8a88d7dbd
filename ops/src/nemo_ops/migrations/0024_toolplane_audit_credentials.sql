-- Every refusal leaves an audit row, not only the calls of an agent that authenticated: a
-- credential that was refused names no agent, and a refused request that is no tool call
-- (tools/list, ping, a body that cannot be parsed) names no tool. So agent_id and tool_id may be
-- NULL, and each row names the method it was about: the JSON-RPC method, the gRPC method, or
-- the HTTP method and path when the body names none.
--
-- The row also says which credential made the request: credential_kind 'agent_token' (token_id
-- is the agent token's id), 'oauth' (token_id is the access token's jti; client_id the OAuth
-- client; subject the token's subject; scopes what the person consented to) or 'none' (no
-- credential came). Older rows keep NULL in the new columns.
ALTER TABLE toolplane.audit_logs
    ALTER COLUMN agent_id DROP NOT NULL,
    ALTER COLUMN tool_id DROP NOT NULL,
    ADD COLUMN method          text,
    ADD COLUMN credential_kind text CHECK (credential_kind IN ('none', 'agent_token', 'oauth')),
    ADD COLUMN client_id       text,
    ADD COLUMN subject         text,
    ADD COLUMN scopes          text[];
