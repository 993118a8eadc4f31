-- cronbox.due_jobs(p_limit): the jobs of the first p_limit due ready futures, in the order
-- cronbox.dispatch would take them (lower priority first, then due time). No locks. The
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
          FROM (SELECT f.job_id, row_number() OVER (ORDER BY f.priority, f.due_at) AS n
                FROM cronbox.job_future f
                WHERE f.hold IS NULL AND f.due_at <= now()
                ORDER BY f.priority, f.due_at
                LIMIT greatest(coalesce(p_limit, 1000), 1)) x
          GROUP BY x.job_id) d
    ORDER BY d.first_seen
$$;

COMMENT ON FUNCTION cronbox.due_jobs(integer) IS
'Poller: the jobs of the first p_limit due ready futures, in dispatch order (no locks); used to isolate a job that makes a dispatch batch fail.';

ALTER FUNCTION cronbox.due_jobs(integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.due_jobs(integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.due_jobs(integer) TO cronbox_process;
