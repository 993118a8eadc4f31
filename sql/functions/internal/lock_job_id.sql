-- cronbox.lock_job_id(job_id): the job's lock, a transaction-level advisory lock keyed by its
-- id (waits for it). The job's lock orders everyone who decides on or changes a job: dispatch
-- (cronbox.try_lock_job_id, SKIP semantics), the finishing functions (cronbox.finish_runs, in
-- job_id order), saturation, and every writer of the job's definition (schedule, pause,
-- resume, unschedule, add_dependency, quarantine: through cronbox.lock_job_named, before any
-- row lock on the job). An advisory lock writes no WAL and dirties no page: locking the job
-- row itself (FOR NO KEY UPDATE) cost a WAL record per run and a full-page image per job page
-- after each checkpoint (issue #14). Key: (1668444014 xor high 32 bits, low 32 bits), a space
-- of its own (the two-key form never meets the one-key locks of ensure_run_partitions and the
-- dependency changes). LANGUAGE sql without SET clauses, so it is inlined into its caller.
CREATE OR REPLACE FUNCTION cronbox.lock_job_id(p_job_id bigint) RETURNS void
LANGUAGE sql VOLATILE
SECURITY INVOKER
AS $$
    SELECT pg_catalog.pg_advisory_xact_lock(1668444014 # (p_job_id >> 32)::integer,
                                            ((p_job_id & 4294967295) - 2147483648)::integer)
$$;

COMMENT ON FUNCTION cronbox.lock_job_id(bigint) IS
'Internal: takes the job''s lock (a transaction-level advisory lock keyed by job_id; waits). Dispatch, the finishing functions, saturation and every writer of a job''s definition hold it while they decide on or change the job.';

ALTER FUNCTION cronbox.lock_job_id(bigint) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.lock_job_id(bigint) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
