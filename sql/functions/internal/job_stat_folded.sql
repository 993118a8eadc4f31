-- cronbox.job_stat_folded(p_job_id, p_overlap, p_every_mode, p_name, p_after_names): one row,
-- folded = true when no policy reads the job's statistics while deciding, so dispatch and the
-- finishing calls leave them to the poller's fold (cronbox.job_stat_change, docs/architecture.md
-- "Statistics off the hot path"): overlap 'allow' (the overlap policy reads active_runs), not
-- fixed delay (its next fire waits for the runs), neither gated (add_dependency: dispatch reads
-- its last fire) nor an upstream (a gate or an after-job reads its last success; p_after_names:
-- the names after-jobs list, found once per call by the caller). The job's own columns come
-- from the caller's row. A job that stops being one has its pending changes folded first, under
-- its lock (cronbox.fold_job_stats_of: schedule(), add_dependency, dispatch of a backfilled fire
-- with an overlap policy of its own).
-- LANGUAGE sql, STABLE, no SET clause, a table function: called in FROM (CROSS JOIN LATERAL) it
-- is inlined into the caller's statement, EXISTS probes included (a scalar SQL function with a
-- sub-select is never inlined: it ran as a function call, planned per statement, per job).
CREATE OR REPLACE FUNCTION cronbox.job_stat_folded(p_job_id bigint, p_overlap text, p_every_mode text,
                                                   p_name text, p_after_names text[])
RETURNS TABLE (folded boolean)
LANGUAGE sql STABLE
SECURITY INVOKER
AS $$
    SELECT p_overlap = 'allow' AND p_every_mode <> 'fixed_delay'
           AND NOT p_name = ANY (coalesce(p_after_names, '{}'))
           -- no dependency at all: one probe per statement (an InitPlan), none per job
           AND ((SELECT NOT EXISTS (SELECT 1 FROM cronbox.job_dependency))
                OR (NOT EXISTS (SELECT 1 FROM cronbox.job_dependency d WHERE d.job_id = p_job_id)
                    AND NOT EXISTS (SELECT 1 FROM cronbox.job_dependency d WHERE d.upstream_id = p_job_id)))
$$;

COMMENT ON FUNCTION cronbox.job_stat_folded(bigint, text, text, text, text[]) IS
'Internal: one row, folded: whether the job''s statistics are folded off the hot path (no policy reads them while deciding: overlap allow, not fixed delay, no dependency either way, not named by an after-job: p_after_names). Inlined when called in FROM.';

ALTER FUNCTION cronbox.job_stat_folded(bigint, text, text, text, text[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.job_stat_folded(bigint, text, text, text, text[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
