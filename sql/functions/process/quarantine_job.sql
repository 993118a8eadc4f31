-- cronbox.quarantine_job(job_id, error, p_bucket): the poller could not process this job (its fires
-- cannot be computed, or its row makes a saturation or dispatch batch fail), so it sets the
-- job aside and carries on with the others. Under the job's row lock: paused with reason
-- 'quarantined: <error>', pending scheduled futures deleted (frontier rewound as pause()
-- does), other ready futures (manual, retries) held until resume; change-log action
-- 'quarantined'; a schedule_paused notification through the outbox. resume() undoes it.
-- Returns false when the job no longer exists (in p_bucket) or is already paused (nothing written).
-- p_bucket: the job's bucket (the poller knows it from its claim); every statement on the
-- job's rows reads and writes that bucket's only, its notification copies included
-- (cronbox.notify_stakeholders). NULL: the job's bucket is looked up first (one read over every
-- bucket), then the same statements.
CREATE OR REPLACE FUNCTION cronbox.quarantine_job(
    p_job_id bigint,
    p_error  text,
    p_bucket integer DEFAULT NULL
) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_bucket integer := p_bucket;
    v_name text;
    v_paused boolean;
    v_first timestamptz;
    v_before timestamptz;
    v_reason text;
    v_note bigint;
BEGIN
    PERFORM cronbox.bucket_walks('cronbox.job', p_bucket);  -- a negative bucket: 22023
    IF v_bucket IS NULL THEN
        SELECT j.bucket INTO v_bucket FROM cronbox.job j WHERE j.job_id = p_job_id;
        IF NOT FOUND THEN
            RETURN false;
        END IF;
    END IF;
    PERFORM cronbox.lock_job_id(p_job_id, v_bucket);  -- the job's lock, before its row lock
    SELECT j.name, j.paused INTO v_name, v_paused
    FROM cronbox.job j WHERE j.bucket = v_bucket AND j.job_id = p_job_id FOR UPDATE;
    IF NOT FOUND OR v_paused THEN
        RETURN false;
    END IF;
    -- Bounded, so a huge error text is not copied into the job, the log and the outbox.
    v_reason := 'quarantined: ' || coalesce(left(p_error, 1000), 'unknown error');
    WITH gone AS (
        DELETE FROM cronbox.job_future f
        WHERE f.bucket = v_bucket AND f.job_id = p_job_id AND f.origin = 'schedule' AND f.attempt = 1
        RETURNING f.fire_at
    )
    SELECT min(g.fire_at) INTO v_first FROM gone g;
    -- Manual and retry futures wait for resume (release_job_holds), never for the backstop.
    UPDATE cronbox.job_future f SET hold = 'paused', held_since = now(), hold_until = 'infinity'
    WHERE f.bucket = v_bucket AND f.job_id = p_job_id AND f.hold IS NULL;
    -- (the rewound times computed beforehand: no STABLE expression in a CASE of an update, Citus)
    IF v_first IS NOT NULL AND isfinite(v_first) THEN
        v_before := v_first - interval '1 microsecond';
        UPDATE cronbox.job_fire f SET
            frontier = least(f.frontier, v_before),
            next_fire = least(f.next_fire, v_first),
            paused = true
        WHERE f.bucket = v_bucket AND f.job_id = p_job_id;
    ELSE
        UPDATE cronbox.job_fire f SET paused = true WHERE f.bucket = v_bucket AND f.job_id = p_job_id;
    END IF;
    UPDATE cronbox.job j SET
        paused = true,
        paused_reason = v_reason,
        paused_at = now(),
        updated_at = now()
    WHERE j.bucket = v_bucket AND j.job_id = p_job_id;
    INSERT INTO cronbox.job_change (job_id, job_name, action, reason, changed_by, changed_at)
    VALUES (p_job_id, v_name, 'quarantined', v_reason, cronbox.caller(), now());
    INSERT INTO cronbox.outbox (run_id, queue, kind, message, created_at, available_at, bucket)
    VALUES (NULL, 'cronbox.notifications', 'notification',
            jsonb_build_object('event', 'schedule_paused', 'job', v_name, 'reason', v_reason,
                               'quarantined', true, 'at', now(),
                               'idempotency_key', 'schedule_paused:' || p_job_id || ':'
                                                  || extract(epoch FROM now())::text),
            now(), now(), v_bucket)
    RETURNING outbox_id INTO v_note;
    PERFORM cronbox.notify_stakeholders(ARRAY[v_note], v_bucket);  -- the job's own recipients (job.notify)
    PERFORM pg_notify('cronbox_outbox', '');
    PERFORM pg_notify('cronbox_schedule', p_job_id::text);
    RETURN true;
END
$$;

COMMENT ON FUNCTION cronbox.quarantine_job(bigint, text, integer) IS
'Poller: sets aside a job it cannot process: paused with reason ''quarantined: <error>'' (error cut at 1000 characters), scheduled futures dropped, other futures held until resume, change-log action quarantined, a schedule_paused notification. resume() undoes it. p_bucket: the job''s bucket, whose rows alone are read and written (NULL: looked up first). Returns false if the job is gone (from p_bucket) or already paused.';

ALTER FUNCTION cronbox.quarantine_job(bigint, text, integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.quarantine_job(bigint, text, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.quarantine_job(bigint, text, integer) TO cronbox_process;
