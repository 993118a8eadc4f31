-- Internal: the body of cronbox.reconcile_queue_limits, with the time as its last parameter p_now. The public
-- cronbox.reconcile_queue_limits passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.reconcile_queue_limits_at(p_queues, p_now): recounts queue_limit.running from
-- cronbox.unfinished_runs() (the outbox and the leases: unfinished runs only) for the given queues
-- (NULL: all), under the rows' locks taken in queue order, and releases held fires into any
-- free slots. The counters are exact by construction; this repairs drift (a limit created
-- while a dispatch was in flight). The poller calls it periodically. Returns rows updated.
CREATE OR REPLACE FUNCTION cronbox.reconcile_queue_limits_at(
    p_queues text[] DEFAULT NULL,
    p_now timestamptz DEFAULT now()
) RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_queues text[];
BEGIN
    SELECT array_agg(q.queue) INTO v_queues FROM cronbox.queue_limit q
    WHERE p_queues IS NULL OR q.queue = ANY (p_queues);
    IF v_queues IS NULL THEN
        RETURN 0;
    END IF;
    -- recounted from the unfinished runs (p_freed NULL), holds released up to the free slots
    RETURN cronbox.release_queue_slots(v_queues, NULL, p_now);
END
$$;

COMMENT ON FUNCTION cronbox.reconcile_queue_limits_at(text[], timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.reconcile_queue_limits(text[]) with the time as p_now; tests use it to fix the clock. Recounts the unfinished runs of limited queues (NULL: all) from cronbox.run under the limit rows'' locks and releases held fires into free slots. Returns the number of queues recounted.';

ALTER FUNCTION cronbox.reconcile_queue_limits_at(text[], timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.reconcile_queue_limits_at(text[], timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
