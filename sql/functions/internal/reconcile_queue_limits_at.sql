-- Internal: the body of cronbox.reconcile_queue_limits, with the time as its last parameter p_now. The public
-- cronbox.reconcile_queue_limits passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.reconcile_queue_limits_at(p_queues, p_now): recounts queue_limit.running from
-- cronbox.run (partial index run_active_job_idx: unfinished runs only) for the given queues
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
    v_n integer;
    v_released integer;
BEGIN
    SELECT array_agg(x.queue) INTO v_queues FROM (
        SELECT q.queue FROM cronbox.queue_limit q
        WHERE p_queues IS NULL OR q.queue = ANY (p_queues)
        ORDER BY q.queue FOR NO KEY UPDATE) x;
    IF v_queues IS NULL THEN
        RETURN 0;
    END IF;
    WITH actual AS (
        SELECT r.queue, count(*) AS n
        FROM cronbox.run r
        WHERE r.state IN ('dispatched', 'delivered', 'running') AND r.queue = ANY (v_queues)
        GROUP BY r.queue
    ),
    counted AS (
        UPDATE cronbox.queue_limit q SET running = coalesce(a.n, 0), updated_at = p_now
        FROM (SELECT u.queue, actual.n FROM unnest(v_queues) u(queue)
              LEFT JOIN actual ON actual.queue = u.queue) a
        WHERE q.queue = a.queue
        RETURNING q.queue, q.max_running - q.running AS free
    ),
    released AS (
        UPDATE cronbox.job_future f SET hold = NULL, hold_queue = NULL, hold_until = NULL
        FROM (SELECT h.future_id
              FROM counted CROSS JOIN LATERAL (
                  SELECT f2.future_id FROM cronbox.job_future f2
                  WHERE f2.hold = 'queue_limit' AND f2.hold_queue = counted.queue
                  ORDER BY f2.priority, f2.due_at
                  LIMIT greatest(counted.free, 0)) h) x
        WHERE f.future_id = x.future_id
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM counted), (SELECT count(*) FROM released) INTO v_n, v_released;
    IF v_released > 0 THEN
        PERFORM pg_notify('cronbox_future', '');
    END IF;
    RETURN v_n;
END
$$;

COMMENT ON FUNCTION cronbox.reconcile_queue_limits_at(text[], timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.reconcile_queue_limits(text[]) with the time as p_now; tests use it to fix the clock. Recounts the unfinished runs of limited queues (NULL: all) from cronbox.run under the limit rows'' locks and releases held fires into free slots. Returns the number of queues recounted.';

ALTER FUNCTION cronbox.reconcile_queue_limits_at(text[], timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.reconcile_queue_limits_at(text[], timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
