-- cronbox.ready_lanes(): each queue and priority that has ready (not held) futures, with the
-- earliest due time among them, in queue and priority order: a loose index scan of
-- job_future_lane_idx (one probe per pair in use, however many futures share it). Used by
-- cronbox.dispatch to share a batch between the queues with due work. LANGUAGE sql, STABLE,
-- no SET clause: inlined into the caller's statement.
CREATE OR REPLACE FUNCTION cronbox.ready_lanes() RETURNS TABLE (queue text, priority integer, due_at timestamptz)
LANGUAGE sql STABLE
SECURITY INVOKER
AS $$
    WITH RECURSIVE lane(q, p, d) AS (
        (SELECT f.queue, f.priority, f.due_at FROM cronbox.job_future f
         WHERE f.hold IS NULL ORDER BY f.queue, f.priority, f.due_at LIMIT 1)
        UNION ALL
        SELECT nxt.queue, nxt.priority, nxt.due_at
        FROM lane CROSS JOIN LATERAL (
            SELECT f.queue, f.priority, f.due_at FROM cronbox.job_future f
            WHERE f.hold IS NULL AND (f.queue, f.priority) > (lane.q, lane.p)
            ORDER BY f.queue, f.priority, f.due_at LIMIT 1
        ) nxt
    )
    SELECT lane.q, lane.p, lane.d FROM lane
$$;

COMMENT ON FUNCTION cronbox.ready_lanes() IS
'Internal: each queue and priority with ready futures and its earliest due time, in queue and priority order (a loose index scan, one probe per pair).';

ALTER FUNCTION cronbox.ready_lanes() OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.ready_lanes() FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
