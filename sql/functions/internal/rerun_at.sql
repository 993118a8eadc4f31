-- Internal: the body of cronbox.rerun, with the time as its last parameter p_now. The public
-- cronbox.rerun passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.rerun_at(run_id, reason, p_now): runs a finished run again: a new run of the same job, fire
-- time and payload, origin 'rerun' (attempt 1, so the job's retry policy applies afresh),
-- decided at once in this transaction through dispatch's own write (cronbox.dispatch_locked)
-- as trigger() is: dispatched, skipped or held as the poller would; it runs even while the
-- job is paused. One pending re-run per fire. Change-log action 'rerun' naming the run.
-- Returns the new run's id (NULL while it is held: queue limit, dependency gate).
-- P0002 unknown run (or one whose job is gone), 55000 a run not finished or a re-run of the
-- same fire still pending, 22004 NULL run_id, 22023 a reason over 1000 characters.
-- Row security: the run and its job are read as the caller may see them (an owner re-runs
-- only its own). Takes the job's lock (cronbox.lock_job_id), as trigger() does. Every statement in
-- the run's bucket (the one its id carries, cronbox.run_bucket; an id drawn without it: by key).
CREATE OR REPLACE FUNCTION cronbox.rerun_at(
    run_id bigint,
    reason text DEFAULT 'rerun by operator',
    p_now  timestamptz DEFAULT now()
) RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_run record;
    v_job cronbox.job;
    v_due timestamptz;
    v_future_id bigint;
    v_run_id bigint;
    v_bucket integer;  -- the run's bucket; NULL: no buckets (plain PostgreSQL)
    v_try integer;
BEGIN
    IF rerun_at.run_id IS NULL THEN
        RAISE EXCEPTION 'run_id: must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM cronbox.assert_reason(rerun_at.reason);
    -- Its bucket: on a database with buckets (Citus), the one its id carries (cronbox.run_bucket;
    -- -1 for an id whose bits name no bucket); NULL on plain PostgreSQL (every row).
    IF to_regclass('cronbox.bucket') IS NOT NULL THEN
        v_bucket := coalesce(cronbox.run_bucket(rerun_at.run_id), -1);
    END IF;
    -- final (history), or still in flight (its outbox row): refused below; in its bucket, and
    -- an id drawn without its bucket found by key over every bucket
    FOR v_try IN 1 .. 2 LOOP
        SELECT x.job_id, x.fire_at, x.state, x.payload, x.bucket INTO v_run
        FROM (SELECT r.job_id, r.fire_at, r.state, r.payload, r.bucket FROM cronbox.run r
              WHERE (v_bucket IS NULL OR r.bucket = v_bucket) AND r.run_id = rerun_at.run_id
              UNION ALL
              SELECT o.job_id, o.fire_at, o.state, o.payload, o.bucket FROM cronbox.outbox o
              WHERE (v_bucket IS NULL OR o.bucket = v_bucket) AND o.outbox_id = rerun_at.run_id AND o.kind = 'run') x
        LIMIT 1;
        EXIT WHEN FOUND OR v_bucket IS NULL;
        v_bucket := NULL;
    END LOOP;
    IF v_run.job_id IS NULL THEN
        RAISE EXCEPTION 'run_id: no run %', rerun_at.run_id USING ERRCODE = 'no_data_found';
    END IF;
    IF v_run.state NOT IN ('succeeded', 'failed', 'lost', 'cancelled', 'skipped') THEN
        RAISE EXCEPTION 'run_id: run % is %; only a finished run (succeeded, failed, lost, cancelled, skipped) can be re-run',
            rerun_at.run_id, v_run.state USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    -- the lock dispatch decides under, in the run's bucket (its job's)
    PERFORM cronbox.lock_job_id(v_run.job_id, v_run.bucket);
    SELECT * INTO v_job FROM cronbox.job j WHERE j.bucket = v_run.bucket AND j.job_id = v_run.job_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run_id: the schedule of run % no longer exists', rerun_at.run_id
            USING ERRCODE = 'no_data_found';
    END IF;
    -- Tenants (docs/operations.md): a queue granted to other owners is refused (42501), and a
    -- re-run counts as a manual fire against the owner's max_fires_per_second (past it, it
    -- waits its turn in job_future and this returns NULL).
    PERFORM cronbox.assert_queue_owner(v_job.queue);
    v_due := cronbox.manual_fire_due(v_job.owner, p_now);
    INSERT INTO cronbox.job_future (job_id, fire_at, due_at, priority, origin, payload, created_at, bucket, queue)
    VALUES (v_job.job_id, v_run.fire_at, v_due, v_job.priority, 'rerun', v_run.payload, p_now, v_job.bucket, v_job.queue)
    ON CONFLICT ON CONSTRAINT job_future_fire_unique DO NOTHING
    RETURNING future_id INTO v_future_id;
    IF v_future_id IS NULL THEN
        RAISE EXCEPTION 'run_id: a re-run of the fire of run % is already pending', rerun_at.run_id
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    PERFORM cronbox.record_change(v_job.job_id, v_job.name, 'rerun',
                                  coalesce(rerun_at.reason, 'rerun by operator') || ' (run ' || rerun_at.run_id || ')',
                                  p_now);
    -- Decided now, in a new statement whose snapshot is taken with the job locked.
    IF v_due > p_now THEN
        RETURN NULL;
    END IF;
    PERFORM cronbox.dispatch_locked(ARRAY[v_future_id], ARRAY[v_job.job_id], NULL, p_now, ARRAY[v_job.bucket]);
    -- The run dispatch wrote for it: the job's newest of origin rerun for this fire (none: held).
    -- (in flight: its outbox row; or final at once, e.g. skipped: history)
    SELECT x.run_id INTO v_run_id
    FROM (SELECT o.outbox_id AS run_id FROM cronbox.outbox o
          WHERE o.bucket = v_job.bucket AND o.job_id = v_job.job_id AND o.kind = 'run' AND o.outbox_id > rerun_at.run_id
            AND o.origin = 'rerun'
            AND o.fire_at = v_run.fire_at AND o.due_at = p_now
          UNION ALL
          SELECT r.run_id FROM cronbox.run r
          WHERE r.bucket = v_job.bucket AND r.job_id = v_job.job_id AND r.run_id > rerun_at.run_id AND r.origin = 'rerun'
            AND r.fire_at = v_run.fire_at AND r.due_at = p_now) x
    ORDER BY x.run_id DESC LIMIT 1;
    RETURN v_run_id;
END
$$;

COMMENT ON FUNCTION cronbox.rerun_at(bigint, text, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.rerun(bigint, text) with the time as p_now; tests use it to fix the clock. Runs a finished run again: a new run of the same job, fire time and payload with origin rerun, decided at once as trigger() is. Returns the new run id, NULL while held.';

ALTER FUNCTION cronbox.rerun_at(bigint, text, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.rerun_at(bigint, text, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
