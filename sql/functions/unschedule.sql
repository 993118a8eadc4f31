-- cronbox.unschedule(name, reason, p_now): removes a job and its pending futures (ON DELETE
-- CASCADE); run history and the change log stay (they have no foreign key to the job).
-- Takes the job's row lock, so it waits for a poller's saturation pass on that job to commit.
-- Returns false (and writes nothing) when no job has that name: safe to call twice.
CREATE OR REPLACE FUNCTION cronbox.unschedule(
    name   text,
    reason text DEFAULT 'unscheduled by operator',
    p_now  timestamptz DEFAULT now()
) RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job_id bigint;
BEGIN
    IF unschedule.name IS NULL THEN
        RAISE EXCEPTION 'name: must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT j.job_id INTO v_job_id FROM cronbox.job j WHERE j.name = unschedule.name FOR UPDATE;
    IF v_job_id IS NULL THEN
        RETURN false;
    END IF;
    -- Fires already written by early dispatch and not yet claimed by a relay are cancelled.
    PERFORM cronbox.withdraw_early_runs(v_job_id, 'cancelled: unscheduled before its fire time', p_now);
    DELETE FROM cronbox.job j WHERE j.job_id = v_job_id;
    PERFORM cronbox.record_change(v_job_id, unschedule.name, 'unscheduled',
                                  coalesce(unschedule.reason, 'unscheduled by operator'), p_now);
    PERFORM pg_notify('cronbox_schedule', v_job_id::text);
    RETURN true;
END
$$;

COMMENT ON FUNCTION cronbox.unschedule(text, text, timestamptz) IS
'Removes the job and its pending futures atomically; run history and the change log stay. Returns false if no job has that name.';
