-- Internal: the body of cronbox.unschedule, with the time as its last parameter p_now. The public
-- cronbox.unschedule passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.unschedule_at(name, reason, p_now): removes a job and its pending futures (deleted
-- here: job_future has no foreign key to the job, migration 0442; every writer of futures
-- holds the job's lock, taken here first, so none is written for the job after this);
-- run history and the change log stay (they have no foreign key to the job); a finish the change
-- log read from the job's state is written as a row first (cronbox.record_finished).
-- Takes the job's lock, so it waits for a poller's saturation pass on that job to commit.
-- Returns false (and writes nothing) when no job has that name: safe to call twice.
CREATE OR REPLACE FUNCTION cronbox.unschedule_at(
    name   text,
    reason text DEFAULT 'unscheduled by operator',
    p_now  timestamptz DEFAULT now()
) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job_id bigint;
    v_owner name;
    v_rate double precision;
    v_bucket integer;
BEGIN
    PERFORM cronbox.assert_job_name('name', unschedule_at.name);
    PERFORM cronbox.assert_reason(unschedule_at.reason);
    IF unschedule_at.name IS NULL THEN
        RAISE EXCEPTION 'name: must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    v_bucket := cronbox.job_bucket(unschedule_at.name);  -- the job's: its rows' statements in it
    PERFORM cronbox.lock_job_named(unschedule_at.name, v_bucket);  -- the job's lock, before its row lock
    SELECT j.job_id INTO v_job_id FROM cronbox.job j WHERE j.bucket = v_bucket AND j.name = unschedule_at.name FOR UPDATE;
    IF v_job_id IS NULL THEN
        RETURN false;
    END IF;
    -- A finish the change log reads from the job's state is logged before the job goes.
    PERFORM cronbox.record_finished(ARRAY[v_job_id], ARRAY[v_bucket]);
    -- Fires already written by early dispatch and not yet claimed by a relay are cancelled.
    PERFORM cronbox.withdraw_early_runs(v_job_id, 'cancelled: unscheduled before its fire time', p_now, v_bucket);
    -- its futures of every origin (schedule, manual, retry, backfill, rerun, dependency)
    DELETE FROM cronbox.job_future f WHERE f.bucket = v_bucket AND f.job_id = v_job_id;
    DELETE FROM cronbox.job j WHERE j.bucket = v_bucket AND j.job_id = v_job_id RETURNING j.owner, j.fire_rate INTO v_owner, v_rate;
    -- its owner's schedule count and fire rate (owners with a quota), its name-search row
    UPDATE cronbox.owner_quota q SET schedules = greatest(q.schedules - 1, 0),
                                     fire_rate = greatest(q.fire_rate - coalesce(v_rate, 0), 0)
    WHERE q.owner = v_owner;
    DELETE FROM cronbox.job_name_search s WHERE s.job_id = v_job_id;
    -- the after-job edges it had: on Citus a reference table, whose write reaches every node, so
    -- only when it has some (a job without them is unscheduled with a worker node down)
    IF EXISTS (SELECT 1 FROM cronbox.job_after_edge e WHERE e.job_id = v_job_id) THEN
        DELETE FROM cronbox.job_after_edge e WHERE e.job_id = v_job_id;
    END IF;
    PERFORM cronbox.record_change(v_job_id, unschedule_at.name, 'unscheduled',
                                  coalesce(unschedule_at.reason, 'unscheduled by operator'), p_now);
    PERFORM pg_notify('cronbox_schedule', v_job_id::text);
    RETURN true;
END
$$;

COMMENT ON FUNCTION cronbox.unschedule_at(text, text, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.unschedule(text, text) with the time as p_now; tests use it to fix the clock. Removes the job and its pending futures atomically; run history and the change log stay. Returns false if no job has that name.';

ALTER FUNCTION cronbox.unschedule_at(text, text, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.unschedule_at(text, text, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
