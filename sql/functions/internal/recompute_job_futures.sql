-- cronbox.recompute_job_futures(p_job_ids, p_reason, p_now): after an exclusion calendar
-- changed, the pending scheduled futures (after p_now) of the given jobs are deleted, the
-- fires early dispatch already wrote for them are withdrawn (cancelled with p_reason), and
-- each job's frontier goes back to at most p_now so the poller stores them again under the
-- new calendar, as a schedule update does. Fires deleted or withdrawn no longer count
-- towards max_runs. Only unfinished cron and fixed-rate jobs (the kinds a calendar may be
-- used with). Takes each job's lock (cronbox.lock_job_id, the lock dispatch decides under),
-- in job_id order, before its row lock on the job. Returns how many jobs.
CREATE OR REPLACE FUNCTION cronbox.recompute_job_futures(p_job_ids bigint[], p_reason text, p_now timestamptz)
RETURNS integer
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job bigint;
    v_bucket integer;
    v_gone bigint;
    v_jobs integer := 0;
BEGIN
    FOR v_job, v_bucket IN
        SELECT j.job_id, j.bucket FROM cronbox.job j
        WHERE j.job_id = ANY (p_job_ids) AND j.finished_at IS NULL
          AND (j.kind = 'cron' OR (j.kind = 'every' AND j.every_mode = 'fixed_rate'))
        ORDER BY j.job_id
    LOOP
        -- the job's lock first (dispatch, early dispatch and saturation decide under it), then
        -- the row, read again: it may have finished while we waited
        PERFORM cronbox.lock_job_id(v_job, v_bucket);
        PERFORM FROM cronbox.job j WHERE j.job_id = v_job AND j.finished_at IS NULL FOR UPDATE;
        IF NOT FOUND THEN
            CONTINUE;
        END IF;
        WITH gone AS (
            DELETE FROM cronbox.job_future f
            WHERE f.job_id = v_job AND f.origin = 'schedule' AND f.attempt = 1 AND f.fire_at > p_now
            RETURNING 1
        )
        SELECT count(*) INTO v_gone FROM gone;
        v_gone := v_gone + cronbox.withdraw_early_runs(v_job, p_reason, p_now);
        UPDATE cronbox.job_fire f SET
            frontier = least(f.frontier, p_now),
            next_fire = CASE WHEN f.paused THEN f.next_fire ELSE least(f.frontier, p_now) END,
            fires_made = greatest(f.fires_made - v_gone, 0)
        WHERE f.job_id = v_job;
        v_jobs := v_jobs + 1;
    END LOOP;
    IF v_jobs > 0 THEN
        PERFORM pg_notify('cronbox_schedule', '');
    END IF;
    RETURN v_jobs;
END
$$;

COMMENT ON FUNCTION cronbox.recompute_job_futures(bigint[], text, timestamp with time zone) IS
'Internal: after a calendar change, deletes the pending scheduled futures of the given unfinished cron/fixed-rate jobs, withdraws their early-dispatched fires and rewinds each frontier to at most p_now so the poller stores them again; those fires no longer count towards max_runs. Takes each job''s lock (cronbox.lock_job_id), in job_id order.';

ALTER FUNCTION cronbox.recompute_job_futures(bigint[], text, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.recompute_job_futures(bigint[], text, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
