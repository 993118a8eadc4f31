-- cronbox.due_jobs(p_limit): the jobs of the due ready futures a cronbox.dispatch batch of
-- p_limit may take: each queue with due work's first p_limit (lower priority first, then due
-- time; a batch takes at most that many from one queue), queue by queue. No locks. The
-- poller calls it only after a dispatch batch failed, to bisect the batch by job
-- (dispatch(p_jobs => ...)) and quarantine the job(s) at fault.
CREATE OR REPLACE FUNCTION cronbox.due_jobs(p_limit integer)
RETURNS SETOF bigint
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_bitmapscan = off  -- an ordered walk up to the limit, never all rows gathered and sorted: SQL conventions
AS $$
    SELECT d.job_id
    FROM (SELECT x.job_id, min(x.n) AS first_seen
          FROM (SELECT y.job_id, row_number() OVER () AS n
                FROM (SELECT DISTINCT l.queue FROM cronbox.ready_lanes() l WHERE l.due_at <= now()) q
                CROSS JOIN LATERAL (
                    SELECT z.job_id
                    FROM (SELECT l.priority FROM cronbox.ready_lanes() l
                          WHERE l.queue = q.queue AND l.due_at <= now() ORDER BY l.priority) lp
                    CROSS JOIN LATERAL (
                        -- one range of job_future_lane_idx, as cronbox.dispatch walks it
                        SELECT f.job_id FROM cronbox.job_future f
                        WHERE f.hold IS NULL
                          AND (f.queue, f.priority, f.due_at) >= (q.queue, lp.priority, '-infinity'::timestamptz)
                          AND (f.queue, f.priority, f.due_at) <= (q.queue, lp.priority, now())
                        ORDER BY f.queue, f.priority, f.due_at
                        LIMIT greatest(coalesce(p_limit, 1000), 1)) z
                    LIMIT greatest(coalesce(p_limit, 1000), 1)) y) x
          GROUP BY x.job_id) d
    ORDER BY d.first_seen
$$;

COMMENT ON FUNCTION cronbox.due_jobs(integer) IS
'Poller: the jobs of the due ready futures a dispatch batch of p_limit may take (each queue''s first p_limit, in dispatch order; no locks); used to isolate a job that makes a dispatch batch fail.';

ALTER FUNCTION cronbox.due_jobs(integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.due_jobs(integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.due_jobs(integer) TO cronbox_process;
