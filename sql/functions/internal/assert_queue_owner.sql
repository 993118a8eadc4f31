-- cronbox.assert_queue_owner(p_queue): schedule() and trigger() may put runs on p_queue only
-- when the queue has no owner grant (open to every cronbox_user: the default), or it is granted
-- to the caller (cronbox.grant_queue(queue, role)), or the caller is an operator (admin,
-- superuser, cronbox_owner). Otherwise 42501, naming the queue and the role. Reads
-- cronbox.queue_grant by its primary key; no locks. A NULL queue passes (its own check says why).
CREATE OR REPLACE FUNCTION cronbox.assert_queue_owner(p_queue text) RETURNS void
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_queue IS NULL
       OR NOT EXISTS (SELECT 1 FROM cronbox.queue_grant g WHERE g.kind = 'owner' AND g.queue = p_queue)
       OR cronbox.caller_granted_queue('owner', p_queue)
       OR cronbox.caller_is_operator() THEN
        RETURN;
    END IF;
    RAISE EXCEPTION 'queue: queue % is not granted to role %', quote_literal(p_queue), quote_ident(cronbox.caller())
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'an administrator grants it with cronbox.grant_queue(queue, role)';
END
$$;

COMMENT ON FUNCTION cronbox.assert_queue_owner(text) IS
'Internal: 42501 unless the caller may schedule onto the queue (no owner grant on it, granted to the caller, or an operator).';

ALTER FUNCTION cronbox.assert_queue_owner(text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.assert_queue_owner(text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
