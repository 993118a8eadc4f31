-- cronbox.job_stat_folded(p_job_id, p_after_names): true when no policy reads the job's statistics while
-- deciding, so dispatch and the finishing calls leave them to the poller's fold
-- (cronbox.job_stat_change, docs/architecture.md "Statistics off the hot path"): overlap
-- 'allow' (the overlap policy reads active_runs), not fixed delay (its next fire waits for the
-- runs), neither gated (add_dependency: dispatch reads its last fire) nor an upstream (a gate or
-- an after-job reads its last success; p_after_names: the names the call's jobs are listed
-- under in after-jobs' `after`, found once per call by the caller). A job that stops being one has its pending changes
-- folded first, under its lock (cronbox.fold_job_stats_of: schedule(), add_dependency, dispatch
-- of a backfilled fire with an overlap policy of its own). Unknown job: false.
-- LANGUAGE sql, STABLE, no SET clause: planned into the caller's statement.
CREATE OR REPLACE FUNCTION cronbox.job_stat_folded(p_job_id bigint, p_after_names text[])
RETURNS boolean
LANGUAGE sql STABLE
SECURITY INVOKER
AS $$
    SELECT coalesce((
        SELECT j.overlap = 'allow' AND j.every_mode <> 'fixed_delay'
               AND NOT EXISTS (SELECT 1 FROM cronbox.job_dependency d WHERE d.job_id = j.job_id)
               AND NOT EXISTS (SELECT 1 FROM cronbox.job_dependency d WHERE d.upstream_id = j.job_id)
               AND NOT j.name = ANY (coalesce(p_after_names, '{}'))
        FROM cronbox.job j
        WHERE j.job_id = p_job_id), false)
$$;

COMMENT ON FUNCTION cronbox.job_stat_folded(bigint, text[]) IS
'Internal: whether the job''s statistics are folded off the hot path (no policy reads them while deciding: overlap allow, not fixed delay, no dependency either way, no after-job naming it: p_after_names).';

ALTER FUNCTION cronbox.job_stat_folded(bigint, text[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.job_stat_folded(bigint, text[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
