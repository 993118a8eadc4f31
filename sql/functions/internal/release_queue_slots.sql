-- cronbox.release_queue_slots(p_queues, p_freed, p_now): the one queue-slot release. For each
-- limited queue in p_queues (locked FOR NO KEY UPDATE in queue order, the locking order of
-- dispatch and the finishing functions): `running` goes down by the matching p_freed count
-- (runs of the queue that just finished), or, when p_freed is NULL, is recounted from the
-- unfinished runs (cronbox.reconcile_queue_limits, set_queue_limit); then as many
-- queue-held futures as there are free slots are released (cronbox.release_futures), lowest
-- priority first, oldest first. Queues without a limit are ignored. Returns the number of
-- limited queues handled.
CREATE OR REPLACE FUNCTION cronbox.release_queue_slots(
    p_queues text[],
    p_freed bigint[],
    p_now timestamptz
) RETURNS integer
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_queues text[];
    v_release bigint[];
BEGIN
    SELECT array_agg(x.queue) INTO v_queues FROM (
        SELECT q.queue FROM cronbox.queue_limit q
        WHERE q.queue = ANY (p_queues)
        ORDER BY q.queue FOR NO KEY UPDATE) x;
    IF v_queues IS NULL THEN
        RETURN 0;
    END IF;
    WITH given AS (
        SELECT u.queue, sum(u.n) AS n
        FROM unnest(p_queues, p_freed) AS u(queue, n)
        WHERE p_freed IS NOT NULL
        GROUP BY u.queue
    ),
    actual AS (
        SELECT u.queue, count(*) AS n
        FROM cronbox.unfinished_runs() u
        WHERE p_freed IS NULL AND u.queue = ANY (v_queues)
        GROUP BY u.queue
    ),
    counted AS (
        UPDATE cronbox.queue_limit q SET
            running = CASE WHEN p_freed IS NULL THEN coalesce(a.n, 0)
                           ELSE greatest(q.running - coalesce(g.n, 0), 0) END,
            updated_at = p_now
        FROM unnest(v_queues) AS u(queue)
        LEFT JOIN given g ON g.queue = u.queue
        LEFT JOIN actual a ON a.queue = u.queue
        WHERE q.queue = u.queue
        RETURNING q.queue, q.max_running - q.running AS free
    )
    SELECT array_agg(h.future_id) INTO v_release
    FROM counted CROSS JOIN LATERAL (
        SELECT f.future_id FROM cronbox.job_future f
        WHERE f.hold = 'queue_limit' AND f.hold_queue = counted.queue
        ORDER BY f.priority, f.due_at
        LIMIT greatest(counted.free, 0)
        FOR UPDATE SKIP LOCKED) h;
    PERFORM cronbox.release_futures(v_release);
    RETURN cardinality(v_queues);
END
$$;

COMMENT ON FUNCTION cronbox.release_queue_slots(text[], bigint[], timestamp with time zone) IS
'Internal: frees slots of limited queues (running minus p_freed, or recounted when p_freed is NULL) and releases that many queue-held futures. Returns the number of limited queues handled.';

ALTER FUNCTION cronbox.release_queue_slots(text[], bigint[], timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.release_queue_slots(text[], bigint[], timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
