-- cronbox.resume_schedules(queue, owner, name_like, reason): resumes, in one call, every paused
-- schedule the caller may change (a cronbox_user: its own) that matches all given filters
-- (as cronbox.pause_schedules). Set-based: what resume() does to one job, for all of them: each
-- continues with its first regular fire after now (fires inside the pause are skipped; a
-- fixed-delay job fires one interval from now, or when its running run finishes), held retry
-- and manual fires go back to the ready index, one change-log row per job (action resumed), one
-- NOTIFY. Quarantined jobs resume too (fix them first). Locks as pause_schedules. Returns the
-- number of schedules resumed.
CREATE OR REPLACE FUNCTION cronbox.resume_schedules(
    queue text DEFAULT NULL,
    owner text DEFAULT NULL,
    name_like text DEFAULT NULL,
    reason text DEFAULT 'resumed by operator'
) RETURNS integer
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now timestamptz := now();
    v_ids bigint[];
    v_state text;
    v_message text;
    v_detail text;
    v_hint text;
BEGIN
    PERFORM cronbox.carry_caller();  -- on Citus, the caller for the policies on the worker nodes
    PERFORM cronbox.assert_reason(resume_schedules.reason);
    v_ids := cronbox.lock_matching_jobs(resume_schedules.queue, resume_schedules.owner, resume_schedules.name_like, true);
    IF v_ids IS NULL THEN
        RETURN 0;
    END IF;
    -- As resume(): the frontier moves to now (fixed delay: one interval from now, unless a run
    -- of it is unfinished, whose end continues the chain).
    WITH delay AS (
        SELECT j.job_id,
               CASE WHEN s.active_runs > 0 THEN NULL
                    ELSE greatest(date_trunc('second', v_now) + j.every, j.starts_at) END AS anchor
        FROM cronbox.job j
        JOIN cronbox.job_stat s ON s.job_id = j.job_id
        WHERE j.job_id = ANY (v_ids) AND j.kind = 'every' AND j.every_mode = 'fixed_delay'
    ),
    fire AS (  -- the saturation state (cronbox.job_fire)
        UPDATE cronbox.job_fire f SET
            frontier = CASE
                WHEN d.job_id IS NOT NULL THEN d.anchor - interval '1 microsecond'
                WHEN j.kind IN ('cron', 'every') AND j.finished_at IS NULL
                    THEN greatest(f.frontier, v_now, j.starts_at - interval '1 microsecond')
                ELSE f.frontier END,
            next_fire = CASE
                WHEN d.job_id IS NOT NULL THEN CASE WHEN d.anchor <= j.ends_at OR j.ends_at IS NULL THEN d.anchor END
                WHEN j.kind IN ('cron', 'every') AND j.finished_at IS NULL
                    THEN greatest(f.frontier, v_now, j.starts_at - interval '1 microsecond')
                ELSE f.next_fire END,
            paused = false
        FROM unnest(v_ids) AS x(id)
        JOIN cronbox.job j ON j.job_id = x.id
        LEFT JOIN delay d ON d.job_id = x.id
        WHERE f.job_id = x.id
    )
    UPDATE cronbox.job j SET
        anchor = CASE WHEN d.job_id IS NOT NULL THEN coalesce(d.anchor, j.anchor) ELSE j.anchor END,
        paused = false, paused_reason = NULL, paused_at = NULL, paused_until = NULL, updated_at = v_now
    FROM unnest(v_ids) AS x(id)
    LEFT JOIN delay d ON d.job_id = x.id
    WHERE j.job_id = x.id;
    -- Fires held while paused (retries, manual) go back to the ready index now.
    PERFORM cronbox.release_futures(ARRAY(
        SELECT f.future_id FROM cronbox.job_future f
        WHERE f.job_id = ANY (v_ids) AND coalesce(f.hold, '') <> ''));  -- as release_job_holds
    INSERT INTO cronbox.job_change (job_id, job_name, action, reason, changed_by, changed_at)
    SELECT j.job_id, j.name, 'resumed', coalesce(resume_schedules.reason, 'resumed by operator'), cronbox.caller(), v_now
    FROM cronbox.job j
    WHERE j.job_id = ANY (v_ids)
    ORDER BY j.job_id;
    PERFORM pg_notify('cronbox_schedule', '');
    RETURN cardinality(v_ids);
EXCEPTION WHEN OTHERS THEN
    -- Re-raised from here so that psql shows the message and one CONTEXT line naming the
    -- function the user called, not the internal frames (docs/sql.md, "Errors").
    GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_message = MESSAGE_TEXT,
                            v_detail = PG_EXCEPTION_DETAIL, v_hint = PG_EXCEPTION_HINT;
    IF v_detail <> '' AND v_hint <> '' THEN
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message, DETAIL = v_detail, HINT = v_hint;
    ELSIF v_detail <> '' THEN
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message, DETAIL = v_detail;
    ELSIF v_hint <> '' THEN
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message, HINT = v_hint;
    END IF;
    RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message;
END
$$;

COMMENT ON FUNCTION cronbox.resume_schedules(text, text, text, text) IS
'Resumes in one call every paused schedule you may change that matches all the filters given (at least one): queue, owner (a role), name_like (a LIKE pattern). As resume() for each, set-based: each continues with its first regular fire after now, one change-log row per job. Returns how many were resumed.';

ALTER FUNCTION cronbox.resume_schedules(text, text, text, text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.resume_schedules(text, text, text, text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.resume_schedules(text, text, text, text) TO cronbox_admin, cronbox_user;
