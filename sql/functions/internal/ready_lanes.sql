-- cronbox.ready_lanes(p_buckets): each queue and priority that has ready (not held) futures, with the
-- earliest due time among them, in queue and priority order: a loose index scan of
-- job_future_lane_idx (one probe per pair in use, however many futures share it). Used by
-- cronbox.dispatch to share a batch between the queues with due work, and by cronbox.next_due
-- and cronbox.due_ahead. p_buckets: only the
-- futures of these buckets (dispatch walks bucket by bucket: docs/citus.md); NULL: every
-- bucket. PL/pgSQL, not an inlined SQL function: Citus plans no parameterized SQL function
-- over a distributed table, and its statement is planned with the buckets bound.
CREATE OR REPLACE FUNCTION cronbox.ready_lanes(p_buckets integer[] DEFAULT NULL) RETURNS TABLE (queue text, priority integer, due_at timestamptz)
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
-- Each probe is served in its order by job_future_lane_idx: a generic plan made while job_future
-- looked empty (no policy filter on it since dispatch runs as cronbox_runner) walked another
-- index instead (job_future_ready_idx, dropped since), filtering the pair and sorting, and read
-- every future per probe.
SET enable_sort = off
AS $$
BEGIN
    RETURN QUERY
    WITH RECURSIVE lane(q, p, d) AS (
        (SELECT f.queue, f.priority, f.due_at FROM cronbox.job_future f
         WHERE f.hold IS NULL AND (p_buckets IS NULL OR f.bucket = ANY (ready_lanes.p_buckets)) ORDER BY f.queue, f.priority, f.due_at LIMIT 1)
        UNION ALL
        SELECT nxt.queue, nxt.priority, nxt.due_at
        FROM lane CROSS JOIN LATERAL (
            SELECT f.queue, f.priority, f.due_at FROM cronbox.job_future f
            WHERE f.hold IS NULL AND (p_buckets IS NULL OR f.bucket = ANY (ready_lanes.p_buckets))
              AND (f.queue, f.priority) > (lane.q, lane.p)
            ORDER BY f.queue, f.priority, f.due_at LIMIT 1
        ) nxt
    )
    SELECT lane.q, lane.p, lane.d FROM lane;
END
$$;

COMMENT ON FUNCTION cronbox.ready_lanes(integer[]) IS
'Internal: each queue and priority with ready futures and its earliest due time, in queue and priority order (a loose index scan, one probe per pair); p_buckets: only those buckets'' futures (NULL: all).';

ALTER FUNCTION cronbox.ready_lanes(integer[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.ready_lanes(integer[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
