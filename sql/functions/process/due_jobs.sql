-- cronbox.due_jobs(p_limit, p_bucket): the jobs of the due ready futures a cronbox.dispatch batch of
-- p_limit may take: each queue with due work's first p_limit (lower priority first, then due
-- time; a batch takes at most that many from one queue), queue by queue. No locks. The
-- poller calls it only after a dispatch batch failed, to bisect the batch by job
-- (dispatch(p_jobs => ...)) and quarantine the job(s) at fault. p_bucket: that bucket's futures
-- only, as the failed batch's dispatch(..., p_bucket) walked them (a poller leasing buckets);
-- NULL: every bucket. PL/pgSQL, its statement planned with the bucket bound (Citus plans no
-- parameterized SQL function over a distributed table).
CREATE OR REPLACE FUNCTION cronbox.due_jobs(p_limit integer, p_bucket integer DEFAULT NULL)
RETURNS SETOF bigint
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_bitmapscan = off  -- an ordered walk up to the limit, never all rows gathered and sorted: SQL conventions
AS $$
DECLARE
    v_set integer[];     -- the buckets walked; NULL: every bucket
    v_queue text[];      -- the lanes with due work (queue, priority), read first: on Citus a
    v_priority integer[]; -- statement may not call a function that reads a distributed table
BEGIN
    IF p_bucket IS NOT NULL THEN
        v_set := ARRAY(SELECT unnest(cronbox.bucket_walks('cronbox.job_future', p_bucket)));
    END IF;
    SELECT array_agg(l.queue ORDER BY l.queue, l.priority), array_agg(l.priority ORDER BY l.queue, l.priority)
      INTO v_queue, v_priority
    FROM cronbox.ready_lanes(v_set) l WHERE l.due_at <= now();
    IF v_queue IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT d.job_id
    FROM (SELECT x.job_id, min(x.n) AS first_seen
          FROM (SELECT y.job_id, row_number() OVER () AS n
                FROM (SELECT DISTINCT u.queue FROM unnest(v_queue) AS u(queue)) q
                CROSS JOIN LATERAL (
                    SELECT z.job_id
                    FROM (SELECT u.priority FROM unnest(v_queue, v_priority) AS u(queue, priority)
                          WHERE u.queue = q.queue ORDER BY u.priority) lp
                    CROSS JOIN LATERAL (
                        -- one range of job_future_lane_idx, as cronbox.dispatch walks it
                        SELECT f.job_id FROM cronbox.job_future f
                        WHERE f.hold IS NULL AND (v_set IS NULL OR f.bucket = ANY (v_set))
                          AND (f.queue, f.priority, f.due_at) >= (q.queue, lp.priority, '-infinity'::timestamptz)
                          AND (f.queue, f.priority, f.due_at) <= (q.queue, lp.priority, now())
                        ORDER BY f.queue, f.priority, f.due_at
                        LIMIT greatest(coalesce(p_limit, 1000), 1)) z
                    LIMIT greatest(coalesce(p_limit, 1000), 1)) y) x
          GROUP BY x.job_id) d
    ORDER BY d.first_seen;
END
$$;

COMMENT ON FUNCTION cronbox.due_jobs(integer, integer) IS
'Poller: the jobs of the due ready futures a dispatch batch of p_limit may take (each queue''s first p_limit, in dispatch order; no locks), of p_bucket only when given (NULL: every bucket); used to isolate a job that makes a dispatch batch fail.';

ALTER FUNCTION cronbox.due_jobs(integer, integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.due_jobs(integer, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.due_jobs(integer, integer) TO cronbox_process;
