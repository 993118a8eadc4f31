-- Internal: the body of cronbox.trigger, with the time as its last parameter p_now. The public
-- cronbox.trigger passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.trigger_at(name, payload, reason, p_now): run a job now, outside its schedule. Inserts
-- one manual future due at p_now (payload, when given, replaces the job's for this run only)
-- and decides it at once, in this transaction, through dispatch's own write
-- (cronbox.dispatch_locked): run + outbox row, a skipped run, or a hold, exactly as the poller's
-- dispatch would; the relay is the only hop left. The schedule's own fires are unchanged. It
-- runs even while the job is paused (dispatch only holds a paused job's other fires, origin
-- 'manual' passes); overlap, retry, dependency gates and queue limits apply as for any fire.
-- Takes the job's lock (cronbox.lock_job_named, the lock dispatch decides under; waits rather
-- than skips: triggers of one job are decided one after the other). Returns the future id.
-- Unknown name: P0002. A queue not granted to the caller: 42501. Past the owner's
-- max_fires_per_second the fire waits for its turn (cronbox.manual_fire_due) and the poller dispatches it.
CREATE OR REPLACE FUNCTION cronbox.trigger_at(
    name    text,
    payload jsonb DEFAULT NULL,
    reason  text DEFAULT 'triggered by operator',
    p_now   timestamptz DEFAULT now()
) RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job cronbox.job;
    v_fire_at timestamptz;
    v_future_id bigint;
    v_due timestamptz;
    v_bucket integer;
BEGIN
    PERFORM cronbox.assert_job_name('name', trigger_at.name);
    PERFORM cronbox.assert_reason(trigger_at.reason);
    IF trigger_at.payload IS NOT NULL AND jsonb_typeof(trigger_at.payload) <> 'object' THEN
        RAISE EXCEPTION 'payload: must be a JSON object, got %', jsonb_typeof(trigger_at.payload)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(trigger_at.payload::text) > cronbox.max_payload_bytes() THEN
        RAISE EXCEPTION 'payload: must be at most % bytes as JSON text (cronbox.max_payload_bytes), got %',
            cronbox.max_payload_bytes(), octet_length(trigger_at.payload::text) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF trigger_at.payload IS NOT NULL AND cronbox.json_too_deep(trigger_at.payload) THEN
        RAISE EXCEPTION 'payload: must be nested at most 2048 levels deep (cronbox.json_too_deep)' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The job's lock, which dispatch takes (dispatch_locked decides under it): concurrent
    -- triggers of one job, schedule()/unschedule() and a poller's dispatch of this job wait for
    -- each other. Read the job after it: a new statement sees what committed meanwhile.
    v_bucket := cronbox.job_bucket(trigger_at.name);  -- the job's bucket: every statement in it
    PERFORM cronbox.lock_job_named(trigger_at.name, v_bucket);
    SELECT * INTO v_job FROM cronbox.job j WHERE j.bucket = v_bucket AND j.name = trigger_at.name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'name: no schedule named %', quote_literal(trigger_at.name) USING ERRCODE = 'no_data_found';
    END IF;
    -- A queue with owner grants takes manual fires of its grantees only (42501), and an owner's
    -- max_fires_per_second spaces its manual fires (they wait in job_future for their time).
    PERFORM cronbox.assert_queue_owner(v_job.queue);
    -- A one-off whose statistics are derived from its runs gets another run: they are written
    -- into its row first, and folded from then on (a one-off triggered without end would make
    -- every read of them a read of every run).
    IF (SELECT s.stats_from_runs FROM cronbox.job_stat s WHERE s.bucket = v_bucket AND s.job_id = v_job.job_id) THEN
        PERFORM cronbox.fold_job_stats_of(ARRAY[v_job.job_id], v_bucket);
    END IF;
    v_due := cronbox.manual_fire_due(v_job.owner, p_now);
    -- (job, fire_at, attempt, origin) is unique among futures: two triggers at the same instant
    -- while the first is still a future (held) get fire times one microsecond apart.
    v_fire_at := p_now;
    LOOP
        INSERT INTO cronbox.job_future (job_id, fire_at, due_at, priority, origin, payload, bucket, queue)
        VALUES (v_job.job_id, v_fire_at, v_due, v_job.priority, 'manual', trigger_at.payload, v_job.bucket, v_job.queue)
        ON CONFLICT ON CONSTRAINT job_future_fire_unique DO NOTHING
        RETURNING future_id INTO v_future_id;
        EXIT WHEN v_future_id IS NOT NULL;
        v_fire_at := v_fire_at + interval '1 microsecond';
    END LOOP;
    PERFORM cronbox.record_change(v_job.job_id, v_job.name, 'triggered',
                                  coalesce(trigger_at.reason, 'triggered by operator'), p_now);
    -- Decided now (one path: the poller's dispatch write), in a new statement whose snapshot
    -- is taken with the job locked; it notifies the relays when a message was written.
    IF v_due <= p_now THEN
        PERFORM cronbox.dispatch_locked(ARRAY[v_future_id], ARRAY[v_job.job_id], NULL, p_now, ARRAY[v_job.bucket]);
    END IF;
    RETURN v_future_id;
END
$$;

COMMENT ON FUNCTION cronbox.trigger_at(text, jsonb, text, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.trigger(text, jsonb, text) with the time as p_now; tests use it to fix the clock. Runs a job now, outside its schedule: inserts a manual future due at once (payload, when given, is used for this run only) and decides it in the same transaction with dispatch''s own write (cronbox.dispatch_locked): dispatched, skipped or held as the poller would. It runs even while the job is paused (the job stays paused); overlap, retry, dependency gates and queue limits apply as for any fire. The run shows in cronbox.runs with origin manual. Returns the future id. Unknown name: P0002.';

ALTER FUNCTION cronbox.trigger_at(text, jsonb, text, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.trigger_at(text, jsonb, text, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
