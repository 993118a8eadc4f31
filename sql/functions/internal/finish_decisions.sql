-- cronbox.finish_decisions(p_fin): for runs that just ended (cronbox.finish_runs), each run with
-- what its job's policy decides: retry now (attempts left), or attempts exhausted (on_error
-- decides). The job by its key, one probe per run whatever the statistics say (a join planned
-- while the job table looked empty walked all of it, per call; LIMIT keeps the subquery a
-- parameterized probe). No locks of its own (the caller holds the jobs' locks).
-- LANGUAGE sql, STABLE, no SET clause: inlined into the caller's statement.
CREATE OR REPLACE FUNCTION cronbox.finish_decisions(p_fin cronbox.finished_run[])
RETURNS TABLE (run_id bigint, job_id bigint, job_name text, queue text, state text, attempt integer,
               fire_at timestamptz, payload jsonb, error text, retryable boolean,
               max_attempts integer, on_error text, retry_delay interval, retry_max_delay interval,
               priority integer, was_paused boolean, every_mode text,
               retry_now boolean, exhausted boolean)
LANGUAGE sql STABLE
SECURITY INVOKER
AS $$
    SELECT f.run_id, f.job_id, f.job_name, f.queue, f.state, f.attempt, f.fire_at, f.payload, f.error,
           f.retryable, j.max_attempts, j.on_error, j.retry_delay, j.retry_max_delay,
           j.priority, j.paused, j.every_mode,
           f.state IN ('failed', 'lost') AND f.retryable
               AND f.attempt < j.max_attempts,
           f.state IN ('failed', 'lost')
               AND NOT (f.retryable AND f.attempt < j.max_attempts)
    FROM pg_catalog.unnest(p_fin) f
    CROSS JOIN LATERAL (
        SELECT j.max_attempts, j.on_error, j.retry_delay, j.retry_max_delay, j.priority,
               j.paused, j.every_mode
        FROM cronbox.job j WHERE j.job_id = f.job_id LIMIT 1) j
$$;

COMMENT ON FUNCTION cronbox.finish_decisions(cronbox.finished_run[]) IS
'Internal: runs that just ended (cronbox.finish_runs) with their job''s retry policy and what it decides (retry_now, exhausted). Inlined into the caller''s statement.';

ALTER FUNCTION cronbox.finish_decisions(cronbox.finished_run[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.finish_decisions(cronbox.finished_run[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
