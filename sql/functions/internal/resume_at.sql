-- Internal: the body of cronbox.resume, with the time as its last parameter p_now. The public
-- cronbox.resume passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.resume_at(name, reason, p_paused_until, p_now): un-pauses a job. Under the job's row lock it moves the
-- frontier to p_now, so the job continues with its first regular fire after p_now: fires that
-- fell inside the pause are skipped, not caught up. Exception: a one-off (`at`) whose time
-- passed during the pause is handed to its catch-up policy (default 'latest': it fires now).
-- Returns false if the job was not paused (nothing written). Unknown name: P0002.
-- p_paused_until (cronbox.resume_paused only): the automatic resume of a pause whose until
-- passed; the job continues from that time (a fire exactly then runs; later ones follow the
-- catch-up policy if the poller is late), logged as changed_by 'cronbox'; false if the job's
-- paused_until is no longer that time (re-paused or resumed meanwhile). Clears paused_until.
CREATE OR REPLACE FUNCTION cronbox.resume_at(
    name   text,
    reason text DEFAULT 'resumed by operator',
    p_paused_until timestamptz DEFAULT NULL,
    p_now  timestamptz DEFAULT now()
) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job cronbox.job;
    v_anchor timestamptz;
    -- Where the job continues from: now, or the end of a pause that ended by itself.
    v_from timestamptz := coalesce(p_paused_until - interval '1 microsecond', p_now);
BEGIN
    PERFORM cronbox.assert_job_name('name', resume_at.name);
    PERFORM cronbox.assert_reason(resume_at.reason);
    v_job := cronbox.lock_job(resume_at.name);
    IF NOT v_job.paused OR (p_paused_until IS NOT NULL
                            AND v_job.paused_until IS DISTINCT FROM p_paused_until) THEN
        RETURN false;
    END IF;
    IF v_job.kind = 'every' AND v_job.every_mode = 'fixed_delay' THEN
        -- One interval after resume; a run still going continues the chain when it finishes.
        v_anchor := CASE WHEN (SELECT s.active_runs FROM cronbox.job_stat s WHERE s.job_id = v_job.job_id) > 0 THEN NULL
                         ELSE greatest(date_trunc('second', coalesce(p_paused_until, p_now)) + v_job.every, v_job.starts_at) END;
        UPDATE cronbox.job_fire f SET
            frontier = v_anchor - interval '1 microsecond',
            next_fire = CASE WHEN v_anchor <= v_job.ends_at OR v_job.ends_at IS NULL THEN v_anchor END
        WHERE f.job_id = v_job.job_id;
    ELSIF v_job.kind IN ('cron', 'every') AND v_job.finished_at IS NULL THEN
        UPDATE cronbox.job_fire f SET
            frontier = greatest(f.frontier, v_from, v_job.starts_at - interval '1 microsecond'),
            next_fire = greatest(f.frontier, v_from, v_job.starts_at - interval '1 microsecond')
        WHERE f.job_id = v_job.job_id;
    END IF;
    UPDATE cronbox.job_fire f SET paused = false WHERE f.job_id = v_job.job_id;
    UPDATE cronbox.job j SET
        anchor = coalesce(v_anchor, j.anchor),  -- (set for a fixed-delay job only)
        paused = false, paused_reason = NULL, paused_at = NULL, paused_until = NULL, updated_at = p_now
    WHERE j.job_id = v_job.job_id;
    -- Retry futures held while paused go back to the ready index now, not at the backstop.
    PERFORM cronbox.release_job_holds(v_job.job_id, p_now);
    IF p_paused_until IS NULL THEN
        PERFORM cronbox.record_change(v_job.job_id, v_job.name, 'resumed',
                                      coalesce(resume_at.reason, 'resumed by operator'), p_now);
    ELSE  -- nobody called it: cronbox itself resumed the job
        INSERT INTO cronbox.job_change (job_id, job_name, action, reason, changed_by, changed_at)
        VALUES (v_job.job_id, v_job.name, 'resumed', resume_at.reason, 'cronbox', p_now);
    END IF;
    PERFORM pg_notify('cronbox_schedule', v_job.job_id::text);
    RETURN true;
END
$$;

COMMENT ON FUNCTION cronbox.resume_at(text, text, timestamp with time zone, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.resume(text, text) with the time as p_now; tests use it to fix the clock. Resumes a paused job from p_now: the fires that fell inside the pause are skipped (a one-off whose time passed goes to its catch-up policy). Returns false if the job was not paused. p_paused_until (cronbox.resume_paused only): the automatic resume of a pause whose until passed, from that time, logged as changed_by cronbox.';

ALTER FUNCTION cronbox.resume_at(text, text, timestamp with time zone, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.resume_at(text, text, timestamp with time zone, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
