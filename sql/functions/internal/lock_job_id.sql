-- cronbox.lock_job_id(job_id, bucket): the job's lock, the row lock (FOR NO KEY UPDATE) on the
-- job's statistics row cronbox.job_stat (waits for it), read in the job's bucket. The job's lock orders everyone who decides on
-- or changes a job: dispatch (cronbox.try_lock_job_id or the same lock with SKIP LOCKED),
-- the finishing functions (cronbox.finish_runs, in job_id order), saturation, backfill, and
-- every writer of the job's definition (schedule, pause, resume, unschedule, add_dependency,
-- quarantine: through cronbox.lock_job_named, before any row lock on the job). A row lock
-- takes no entry in the server's shared lock table (a transaction-level advisory lock per job
-- did, and a batch of distinct jobs could fill it for every session of the database);
-- FOR NO KEY UPDATE is what dispatch's and finish_runs' UPDATE of the row takes anyway,
-- so they need no second lock; it leaves foreign-key checks (FOR KEY SHARE) alone. Every job
-- has a job_stat row (cronbox.add_job_rows); a job without one cannot be locked.
-- plpgsql, not sql: Citus routes the statement of a plpgsql function by its bucket (one task),
-- not that of a sql function with parameters.
CREATE OR REPLACE FUNCTION cronbox.lock_job_id(p_job_id bigint, p_bucket integer) RETURNS void
LANGUAGE plpgsql VOLATILE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM FROM cronbox.job_stat s WHERE s.bucket = p_bucket AND s.job_id = p_job_id FOR NO KEY UPDATE OF s;
END
$$;

COMMENT ON FUNCTION cronbox.lock_job_id(bigint, integer) IS
'Internal: takes the job''s lock (its cronbox.job_stat row in the job''s bucket, FOR NO KEY UPDATE; waits). Dispatch, the finishing functions, saturation, backfill and every writer of a job''s definition hold it while they decide on or change the job.';

ALTER FUNCTION cronbox.lock_job_id(bigint, integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.lock_job_id(bigint, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
