-- cronbox.worker_queue(p_queue): claim_runs' queue, checked: 42501 naming the queue when the
-- caller may not work it (cronbox.worker_may_work). Returns p_queue. A NULL or over-long queue
-- passes unchecked (claim_runs refuses it with its own bound). No locks.
CREATE OR REPLACE FUNCTION cronbox.worker_queue(p_queue text) RETURNS text
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_queue IS NULL OR length(p_queue) > 100 OR cronbox.worker_may_work(p_queue) THEN
        RETURN p_queue;
    END IF;
    RAISE EXCEPTION 'queue: queue % is not granted to worker role %', quote_literal(p_queue), quote_ident(cronbox.caller())
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'an administrator grants it with cronbox.grant_queue(queue, role, kind => ''worker'')';
END
$$;

COMMENT ON FUNCTION cronbox.worker_queue(text) IS
'Internal: returns the queue when the caller may work it, else 42501 naming it (claim_runs).';

ALTER FUNCTION cronbox.worker_queue(text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.worker_queue(text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
