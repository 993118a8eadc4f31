-- cronbox.job_unfinished_runs(p_job_id): the job's runs not finished yet (dispatched,
-- delivered, running), newest first. No index of cronbox.run names the state (migration 0190:
-- a run's last update stays heap-only); the job's history is walked newest first
-- (run_job_history_idx, backwards) until job_stat.active_runs of them are found, a count that
-- is exact under the job's lock once its statistics folded off the hot path are folded
-- (cronbox.fold_job_stats_of; always, for a job a policy reads): so call it with the job locked. Usually the count is 0 and
-- nothing is read; otherwise it reads the job's runs since its oldest unfinished one.
-- LANGUAGE sql, STABLE, no SET clause: inlined into the caller's statement.
CREATE OR REPLACE FUNCTION cronbox.job_unfinished_runs(p_job_id bigint)
RETURNS TABLE (run_id bigint, state text, dispatched_at timestamptz, cancel_requested boolean)
LANGUAGE sql STABLE
SECURITY INVOKER
AS $$
    SELECT r.run_id, r.state, r.dispatched_at, r.cancel_requested
    FROM cronbox.run r
    WHERE r.job_id = p_job_id AND r.state IN ('dispatched', 'delivered', 'running')
    ORDER BY r.run_id DESC
    LIMIT (SELECT s.active_runs FROM cronbox.job_stat s WHERE s.job_id = p_job_id)
$$;

COMMENT ON FUNCTION cronbox.job_unfinished_runs(bigint) IS
'Internal: a job''s unfinished runs, newest first, found by walking its history until job_stat.active_runs of them are found (call with the job locked).';

ALTER FUNCTION cronbox.job_unfinished_runs(bigint) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.job_unfinished_runs(bigint) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
