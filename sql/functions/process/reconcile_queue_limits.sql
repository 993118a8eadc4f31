-- cronbox.reconcile_queue_limits(p_queues): recounts queue_limit.running from
-- cronbox.unfinished_runs() (the outbox and the leases: unfinished runs only) for the given queues
-- (NULL: all), under the rows' locks taken in queue order, and releases held fires into any
-- free slots. The counters are exact by construction; this repairs drift (a limit created
-- while a dispatch was in flight). The poller calls it periodically. Returns rows updated.
-- Thin wrapper: the body is cronbox.reconcile_queue_limits_at (internal/reconcile_queue_limits_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.reconcile_queue_limits(
    p_queues text[] DEFAULT NULL::text[]
) RETURNS integer
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT cronbox.reconcile_queue_limits_at($1, now())
$$;

COMMENT ON FUNCTION cronbox.reconcile_queue_limits(text[]) IS
'Recounts the unfinished runs of limited queues (NULL: all) from cronbox.run under the limit rows'' locks and releases held fires into free slots. Returns the number of queues recounted.';

ALTER FUNCTION cronbox.reconcile_queue_limits(text[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.reconcile_queue_limits(text[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.reconcile_queue_limits(text[]) TO cronbox_process;
