-- An agent's legacy token (toolplane.agents.token_hash: one token per agent, bound to no user,
-- from before toolplane.agent_tokens) is read no more: every agent token is a row of
-- agent_tokens, with the id that audit rows and approvals name. A legacy token still set becomes
-- such a row, unbound, as it was, so the agent holding it keeps working until an operator
-- revokes it (`nemo revoke-token`) and issues a bound one. The same hash already in agent_tokens
-- was found there first before, so that row stays.
INSERT INTO toolplane.agent_tokens (agent_id, token_hash, label)
SELECT id, token_hash, 'legacy agent token (migration 0019)'
FROM toolplane.agents
WHERE token_hash IS NOT NULL
ON CONFLICT (token_hash) DO NOTHING;

ALTER TABLE toolplane.agents DROP COLUMN token_hash;
