-- cronbox.queue_waiting(): the futures cronbox.queues counts, the caller may see: the ready ones
-- whose due time has come (per queue and priority in use, a loose index scan of
-- job_future_lane_idx up to now, as cronbox.ready_lanes) and the held ones (the partial
-- job_future_held_idx), never the whole horizon. With the hot tables distributed (Citus), bucket
-- by bucket: Citus runs a recursive CTE only with the bucket bound, one shard per statement.
-- SECURITY DEFINER only to read job_future, which no cronbox role may read directly; row
-- security still decides which futures come out (the caller carried to Citus's worker nodes
-- first, cronbox.carry_caller). No locks.
CREATE OR REPLACE FUNCTION cronbox.queue_waiting()
RETURNS TABLE (bucket integer, job_id bigint, due_at timestamptz, held boolean)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    v_bucket integer;
    v_buckets integer[] := ARRAY[NULL::integer];  -- one pass over every bucket
BEGIN
    PERFORM cronbox.carry_caller();  -- on Citus, the caller for the policies on the worker nodes
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN  -- Citus (its catalog named only then)
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = 'cronbox.job_future'::regclass) THEN
            v_buckets := ARRAY(SELECT b.bucket FROM cronbox.bucket b ORDER BY b.bucket);
        END IF;
    END IF;
    FOREACH v_bucket IN ARRAY v_buckets LOOP
        RETURN QUERY
        WITH RECURSIVE lane(q, p) AS (
            -- the queues and priorities with ready futures, one probe each
            (SELECT f.queue, f.priority FROM cronbox.job_future f
             WHERE f.hold IS NULL AND (v_bucket IS NULL OR f.bucket = v_bucket)
             ORDER BY f.queue, f.priority LIMIT 1)
            UNION ALL
            SELECT nxt.queue, nxt.priority
            FROM lane CROSS JOIN LATERAL (
                SELECT f.queue, f.priority FROM cronbox.job_future f
                WHERE f.hold IS NULL AND (v_bucket IS NULL OR f.bucket = v_bucket)
                  AND (f.queue, f.priority) > (lane.q, lane.p)
                ORDER BY f.queue, f.priority LIMIT 1) nxt
        )
        -- ready and due: one range of job_future_lane_idx (queue, priority, due_at) per pair
        SELECT f.bucket, f.job_id, f.due_at, false
        FROM lane CROSS JOIN LATERAL (
            SELECT f.bucket, f.job_id, f.due_at FROM cronbox.job_future f
            WHERE f.hold IS NULL AND (v_bucket IS NULL OR f.bucket = v_bucket)
              AND f.queue = lane.q AND f.priority = lane.p AND f.due_at <= now()) f
        UNION ALL
        SELECT f.bucket, f.job_id, f.due_at, true
        FROM cronbox.job_future f
        WHERE f.hold IS NOT NULL AND (v_bucket IS NULL OR f.bucket = v_bucket);
    END LOOP;
END
$$;

COMMENT ON FUNCTION cronbox.queue_waiting() IS
'The futures cronbox.queues counts that the caller may see: ready ones already due (a loose index scan per queue and priority up to now) and held ones, with their bucket and job; on Citus bucket by bucket.';

ALTER FUNCTION cronbox.queue_waiting() OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.queue_waiting() FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.queue_waiting() TO cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
