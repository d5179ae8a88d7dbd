-- OAuth clients (the MCP hosts people sign in with) and the registered agent each acts as. An
-- OAuth access token names the person (its subject) and the client; the client decides which
-- agent's grants and policies apply, so a client missing here is refused at the edge. Operators
-- manage the table with `nemo oauth-clients add|list|remove`; the tool plane only reads it.
CREATE TABLE toolplane.oauth_clients (
    -- As the authorization server writes it in the token's client claim: an opaque id, or the
    -- https URL of a client ID metadata document.
    client_id  text PRIMARY KEY
        CHECK (length(client_id) <= 512 AND client_id ~ '^[\x21-\x7e]+$'),
    agent_id   text NOT NULL REFERENCES toolplane.agents (id) ON DELETE CASCADE,
    label      text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX oauth_clients_agent_idx ON toolplane.oauth_clients (agent_id);

GRANT SELECT ON toolplane.oauth_clients TO nemo_toolplane;

-- A change of who a client acts as changes who may do what: tool plane processes drop what they
-- keep in memory, as for agents, tokens, grants and policies (0009).
CREATE TRIGGER oauth_clients_notify_access
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON toolplane.oauth_clients
    FOR EACH STATEMENT EXECUTE FUNCTION toolplane.notify_access_changed();
