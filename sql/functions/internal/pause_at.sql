-- Internal: the body of cronbox.pause, with the time as its last parameter p_now. The public
-- cronbox.pause passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.pause_at(name, reason, after_failure, until, p_now): stops a job from firing. Under the job's
-- row lock it deletes the pending scheduled futures (first attempts of regular fires) and marks
-- the job paused; the saturation index skips paused jobs. Retry and manual futures stay, held
-- by dispatch until resume. Fires that fall inside the pause are not run and not recorded.
-- until (optional: finite, after p_now, at most 366 days ahead): the poller resumes it by
-- itself then (cronbox.resume_paused). Pausing a paused job replaces its until; returns false
-- if the job was already paused with the same until (nothing written). Unknown name: P0002.
CREATE OR REPLACE FUNCTION cronbox.pause_at(
    name          text,
    reason        text DEFAULT 'paused by operator',
    after_failure boolean DEFAULT false,
    until         timestamptz DEFAULT NULL,
    p_now         timestamptz DEFAULT now()
) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job cronbox.job;
    v_first timestamptz;
    v_gone bigint;
    v_before timestamptz;
BEGIN
    PERFORM cronbox.assert_job_name('name', pause_at.name);
    PERFORM cronbox.assert_reason(pause_at.reason);
    IF pause_at.until IS NOT NULL AND NOT (isfinite(pause_at.until) AND pause_at.until > p_now
                                            AND pause_at.until <= p_now + interval '366 days') THEN
        RAISE EXCEPTION 'until: must be a finite time after now and at most 366 days ahead, got %',
            pause_at.until USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_job := cronbox.lock_job(pause_at.name);
    IF v_job.paused THEN
        IF v_job.paused_until IS NOT DISTINCT FROM pause_at.until THEN
            RETURN false;
        END IF;
        -- A new pause of a paused job replaces when (or whether) it resumes by itself.
        UPDATE cronbox.job j SET
            paused_until = pause_at.until,
            paused_reason = coalesce(pause_at.reason, 'paused by operator'),
            updated_at = p_now
        WHERE j.bucket = v_job.bucket AND j.job_id = v_job.job_id;
        PERFORM cronbox.record_change(v_job.job_id, v_job.name,
                                      CASE WHEN pause_at.after_failure THEN 'paused_after_failure' ELSE 'paused' END,
                                      coalesce(pause_at.reason, 'paused by operator')
                                      || CASE WHEN pause_at.until IS NULL THEN ' (until resumed)'
                                              ELSE ' (until ' || pause_at.until || ')' END, p_now);
        RETURN true;
    END IF;
    -- Fires already written by early dispatch and not yet claimed by a relay are cancelled.
    v_gone := cronbox.withdraw_early_runs(v_job.job_id, 'cancelled: paused before its fire time', p_now, v_job.bucket);
    -- Rewind the frontier before the deleted fires, so a one-off whose future is dropped
    -- here is not taken as done (resume() decides what happens to it).
    WITH gone AS (
        DELETE FROM cronbox.job_future f
        WHERE f.bucket = v_job.bucket AND f.job_id = v_job.job_id AND f.origin = 'schedule' AND f.attempt = 1
        RETURNING f.fire_at
    )
    SELECT min(g.fire_at), v_gone + count(*) INTO v_first, v_gone FROM gone g;
    -- (the rewound frontier computed beforehand: no STABLE expression in a CASE of an update, Citus)
    v_before := v_first - interval '1 microsecond';
    UPDATE cronbox.job_fire f SET
        frontier = CASE WHEN v_first IS NULL THEN f.frontier
                        ELSE least(f.frontier, v_before) END,
        next_fire = CASE WHEN v_first IS NULL THEN f.next_fire
                         ELSE least(f.next_fire, v_first) END,
        fires_made = greatest(f.fires_made - v_gone, 0),  -- dropped fires do not count towards max_runs
        paused = true
    WHERE f.bucket = v_job.bucket AND f.job_id = v_job.job_id;
    UPDATE cronbox.job j SET
        finished_at = CASE WHEN v_first IS NULL THEN j.finished_at END,
        paused = true,
        paused_reason = coalesce(pause_at.reason, 'paused by operator'),
        paused_at = p_now,
        paused_until = pause_at.until,
        updated_at = p_now
    WHERE j.bucket = v_job.bucket AND j.job_id = v_job.job_id;
    PERFORM cronbox.record_change(v_job.job_id, v_job.name,
                                  CASE WHEN pause_at.after_failure THEN 'paused_after_failure' ELSE 'paused' END,
                                  coalesce(pause_at.reason, 'paused by operator')
                                  || CASE WHEN pause_at.until IS NULL THEN ''
                                          ELSE ' (until ' || pause_at.until || ')' END, p_now);
    PERFORM pg_notify('cronbox_schedule', v_job.job_id::text);
    RETURN true;
END
$$;

COMMENT ON FUNCTION cronbox.pause_at(text, text, boolean, timestamp with time zone, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.pause(text, text, boolean, timestamp with time zone) with the time as p_now; tests use it to fix the clock. Pauses a job: its pending scheduled futures are deleted atomically and no new ones are made; fires inside the pause are skipped (not run, not recorded). after_failure => true logs it as paused_after_failure. until => a time (finite, after p_now, at most 366 days ahead): the poller resumes it by itself then, logged as an automatic resume (NULL: until resume()). Pausing a paused job replaces its until; returns false if it was already paused with the same until.';

ALTER FUNCTION cronbox.pause_at(text, text, boolean, timestamp with time zone, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.pause_at(text, text, boolean, timestamp with time zone, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
