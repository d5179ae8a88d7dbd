-- Every change to who may do what (agents, their tokens, grants, policies) notifies the channel
-- nemo_toolplane_access at commit. Tool plane processes keep valid tokens and their rules in
-- memory and drop them on this notification, so a revocation or a new deny policy applies to the
-- next call, on every replica, without a query per call.
CREATE FUNCTION toolplane.notify_access_changed() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pg_notify('nemo_toolplane_access', TG_TABLE_NAME);
    RETURN NULL;
END
$$;

CREATE TRIGGER agents_notify_access
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON toolplane.agents
    FOR EACH STATEMENT EXECUTE FUNCTION toolplane.notify_access_changed();

CREATE TRIGGER agent_tokens_notify_access
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON toolplane.agent_tokens
    FOR EACH STATEMENT EXECUTE FUNCTION toolplane.notify_access_changed();

CREATE TRIGGER grants_notify_access
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON toolplane.grants
    FOR EACH STATEMENT EXECUTE FUNCTION toolplane.notify_access_changed();

CREATE TRIGGER policies_notify_access
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON toolplane.policies
    FOR EACH STATEMENT EXECUTE FUNCTION toolplane.notify_access_changed();

REVOKE ALL ON FUNCTION toolplane.notify_access_changed() FROM PUBLIC;
