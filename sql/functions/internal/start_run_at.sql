-- Internal: the body of cronbox.start_run, with the time as its last parameter p_now. The public
-- cronbox.start_run passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.start_run_at(run_id, worker, p_now): optional; a worker says it started the run.
-- Locks the run's outbox row only (the run in flight); dispatched/delivered -> running, records the worker and renews the
-- lease (the job's timeout from now). Repeating it from the same worker returns the lease.
-- Raises P0002 for an unknown run, 55000 if the run is finished or asked to cancel.
-- Its bucket: on a database with buckets (Citus), the one its id carries (cronbox.run_bucket),
-- every statement on that bucket's rows; a run not there (an id drawn without its bucket) is
-- looked up by key over every bucket, without a lock, then locked in its bucket. Plain
-- PostgreSQL: no bucket filter (one bucket).
CREATE OR REPLACE FUNCTION cronbox.start_run_at(
    run_id bigint,
    worker text,
    p_now timestamptz DEFAULT now()
) RETURNS timestamptz
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off  -- short OLTP statements: compiling costs more than running
AS $$
DECLARE
    v_run cronbox.outbox;
    v_state text;
    v_deadline timestamptz;
    v_bucket integer;  -- the run's bucket; NULL: no buckets (plain PostgreSQL)
BEGIN
    IF start_run_at.run_id IS NULL THEN
        RAISE EXCEPTION 'run_id: must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM cronbox.assert_worker(start_run_at.worker);
    IF start_run_at.worker IS NULL OR start_run_at.worker = '' THEN
        RAISE EXCEPTION 'worker: must name the worker' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    -- the owner rule (cronbox.caller_hidden_runs: NULL for every worker, at once): another
    -- owner's run is an unknown run to a limited caller
    IF cronbox.caller_hidden_runs(ARRAY[start_run_at.run_id]) <> '{}' THEN
        RAISE EXCEPTION 'run_id: no run %', start_run_at.run_id USING ERRCODE = 'no_data_found';
    END IF;
    IF to_regclass('cronbox.bucket') IS NOT NULL THEN
        -- (-1, no bucket's: an id whose bits name no bucket, looked up below)
        v_bucket := coalesce(cronbox.run_bucket(start_run_at.run_id), -1);
    END IF;
    -- The run in flight is its outbox row (by key); a run not there is final, or unknown.
    SELECT * INTO v_run FROM cronbox.outbox o
    WHERE (v_bucket IS NULL OR o.bucket = v_bucket) AND o.outbox_id = start_run_at.run_id AND o.kind = 'run'
    FOR UPDATE;
    IF NOT FOUND AND v_bucket IS NOT NULL THEN  -- an id drawn without its bucket: found by key, then locked there
        SELECT o.bucket INTO v_bucket FROM cronbox.outbox o WHERE o.outbox_id = start_run_at.run_id AND o.kind = 'run';
        IF v_bucket IS NOT NULL THEN
            SELECT * INTO v_run FROM cronbox.outbox o
            WHERE o.bucket = v_bucket AND o.outbox_id = start_run_at.run_id AND o.kind = 'run' FOR UPDATE;
        END IF;
    END IF;
    IF v_run.outbox_id IS NULL THEN
        SELECT r.state INTO v_state FROM cronbox.run r WHERE r.run_id = start_run_at.run_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'run_id: no run %', start_run_at.run_id USING ERRCODE = 'no_data_found';
        END IF;
        RAISE EXCEPTION 'run_id: run % is %, it cannot be started', start_run_at.run_id, v_state
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF v_run.state = 'running' AND v_run.worker = start_run_at.worker AND NOT v_run.cancel_requested THEN
        RETURN v_run.run_lease_until;
    END IF;
    IF v_run.state NOT IN ('dispatched', 'delivered') THEN
        RAISE EXCEPTION 'run_id: run % is %, it cannot be started', v_run.outbox_id,
            v_run.state || CASE WHEN v_run.state = 'running' THEN format(' on worker %s', v_run.worker) ELSE '' END
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF v_run.cancel_requested THEN
        RAISE EXCEPTION 'run_id: run % was asked to cancel, it cannot be started', v_run.outbox_id
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    v_deadline := p_now + coalesce((SELECT j.timeout FROM cronbox.job j
                                    WHERE j.bucket = v_run.bucket AND j.job_id = v_run.job_id),
                                   interval '5 minutes');
    -- The run's lease only. A run started before any relay's ack (a fast worker) keeps its
    -- delivery open (delivered_at NULL, the relay's lease in lease_until): the relay that sent
    -- it acks it (with the worker's answer, or 202), and if that relay dies first another
    -- sends it again after the relay's lease, as for any message never acked (the kit drops
    -- the duplicate, answering with the outcome it has).
    UPDATE cronbox.outbox o SET
        state = 'running', started_at = p_now, worker = start_run_at.worker,
        run_lease_until = v_deadline
    WHERE o.bucket = v_run.bucket AND o.outbox_id = v_run.outbox_id;
    RETURN v_deadline;
END
$$;

COMMENT ON FUNCTION cronbox.start_run_at(bigint, text, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.start_run(bigint, text) with the time as p_now; tests use it to fix the clock. Worker (optional): marks a dispatched or delivered run running on worker and renews its lease (the job''s timeout); returns the deadline. Idempotent for the same worker; raises 55000 for a finished run or one asked to cancel.';

ALTER FUNCTION cronbox.start_run_at(bigint, text, timestamp with time zone) OWNER TO cronbox_runner;
REVOKE ALL ON FUNCTION cronbox.start_run_at(bigint, text, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
