-- cronbox.record_finished(p_jobs, p_now): logs 'finished' in the change log for those of p_jobs
-- that have nothing left to schedule (job.finished_at, set when saturation found no fire left)
-- and whose last scheduled fire has now been decided (no future of origin 'schedule' left:
-- dispatched, skipped, failed or missed), once per finish (none logged since finished_at).
-- Called by dispatch and early dispatch after their write, under the jobs' locks. Indexes:
-- job_finished_idx (only finished jobs are probed), job_future_fire_unique, job_change_job_idx.
CREATE OR REPLACE FUNCTION cronbox.record_finished(p_jobs bigint[], p_now timestamptz)
RETURNS integer
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    WITH logged AS (
        INSERT INTO cronbox.job_change (job_id, job_name, action, reason, changed_by, changed_at)
        SELECT j.job_id, j.name, 'finished',
               CASE WHEN (SELECT f.fires_made FROM cronbox.job_fire f WHERE f.job_id = j.job_id) >= j.max_runs
                    THEN format('max_runs reached: %s fires', j.max_runs)
                    WHEN j.kind = 'at' THEN 'one-off fire handled'
                    WHEN j.ends_at IS NOT NULL THEN 'ends_at passed'
                    ELSE 'no fire left' END,
               session_user, p_now
        FROM cronbox.job j
        WHERE j.job_id = ANY (p_jobs) AND j.finished_at IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM cronbox.job_future f WHERE f.job_id = j.job_id AND f.origin = 'schedule')
          AND NOT EXISTS (SELECT 1 FROM cronbox.job_change c
                          WHERE c.job_id = j.job_id AND c.action = 'finished' AND c.changed_at >= j.finished_at)
        RETURNING 1
    )
    SELECT count(*)::integer FROM logged
$$;

COMMENT ON FUNCTION cronbox.record_finished(bigint[], timestamp with time zone) IS
'Internal: logs ''finished'' (one-off fire handled, ends_at passed, max_runs reached, no fire left) for those of p_jobs with nothing left to schedule whose last scheduled fire has been decided, once per finish; called by dispatch and early dispatch.';

ALTER FUNCTION cronbox.record_finished(bigint[], timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.record_finished(bigint[], timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
