-- Recording a turn again replaces its messages. The context role gets no DELETE on chat
-- messages; this definer function deletes exactly one turn of one session, and only of a learner
-- bound to the caller's transaction (it runs as the owner, which bypasses row-level security, so
-- the binding is checked here explicitly).
CREATE FUNCTION learning.clear_chat_turn(p_session_id text, p_turn_id text) RETURNS integer
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    WITH deleted AS (
        DELETE FROM learning.chat_messages AS m
        WHERE m.session_id = p_session_id
          AND m.turn_id = p_turn_id
          AND m.learner_id = ANY (string_to_array(current_setting('nemo.learner_ids', true), ','))
        RETURNING 1
    )
    SELECT count(*)::integer FROM deleted
$$;

REVOKE ALL ON FUNCTION learning.clear_chat_turn(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION learning.clear_chat_turn(text, text) TO nemo_context;
