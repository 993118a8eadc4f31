-- cronbox.quarantine_job(job_id, error): the poller could not process this job (its fires
-- cannot be computed, or saturating or dispatching it fails), so it is set aside and every
-- other job keeps going. Pauses it with 'quarantined: <error>' as the reason (as pause()
-- does: pending scheduled futures deleted; other futures held 'paused', out of the ready
-- index), logs the change and queues a `job_quarantined` notification. Locks the job row.
-- Idempotent: a job already paused is left as it is (returns false). `cronbox.resume`
-- takes it back once the cause is fixed.
CREATE OR REPLACE FUNCTION cronbox.quarantine_job(
    p_job_id bigint,
    p_error  text
) RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now constant timestamptz := now();
    v_job cronbox.job;
    v_reason text;
BEGIN
    SELECT * INTO v_job FROM cronbox.job j WHERE j.job_id = p_job_id FOR UPDATE;
    IF NOT FOUND OR v_job.paused THEN
        RETURN false;
    END IF;
    -- Bounded, printable: the error may quote the bad value.
    v_reason := 'quarantined: ' || left(regexp_replace(coalesce(p_error, 'unknown error'),
                                                       '[[:cntrl:]]+', ' ', 'g'), 500);
    DELETE FROM cronbox.job_future f
    WHERE f.job_id = p_job_id AND f.origin = 'schedule' AND f.attempt = 1;
    UPDATE cronbox.job_future f SET
        hold = 'paused', held_since = coalesce(f.held_since, v_now),
        hold_until = v_now + interval '30 seconds'
    WHERE f.job_id = p_job_id AND f.hold IS NULL;
    UPDATE cronbox.job j SET
        paused = true, paused_reason = v_reason, paused_at = v_now, updated_at = v_now
    WHERE j.job_id = p_job_id;
    PERFORM cronbox.record_change(p_job_id, v_job.name, 'paused', v_reason, v_now);
    INSERT INTO cronbox.outbox (run_id, queue, kind, message, created_at, available_at)
    VALUES (NULL, 'cronbox.notifications', 'notification',
            jsonb_build_object('event', 'job_quarantined', 'job', v_job.name, 'reason', v_reason,
                               'at', v_now,
                               'idempotency_key', 'job_quarantined:' || p_job_id || ':'
                                                  || extract(epoch FROM v_now)::text),
            v_now, v_now);
    PERFORM pg_notify('cronbox_schedule', p_job_id::text);
    RETURN true;
END
$$;

COMMENT ON FUNCTION cronbox.quarantine_job(bigint, text) IS
'Poller: sets aside a job it cannot process: paused with reason ''quarantined: <error>'' (pending scheduled futures deleted, others held), a change-log entry and a job_quarantined notification. Returns false if the job was already paused or is gone. Resume it with cronbox.resume once fixed.';
