-- cronbox.start_run_try(p_run_id, p_worker, p_now): the work of start_run for one run, its
-- refusal returned instead of raised: `deadline` (the run's lease end) when started (or already
-- running on p_worker), else `code` ('P0002': unknown to the caller; '55000': finished, running on
-- another worker or asked to cancel) and `error` (the message start_run raises). Shared by
-- cronbox.start_run_at, which raises the refusal, and cronbox.start_runs, which returns one per
-- run (no subtransaction per run). The arguments are checked by the callers.
-- Locks the run's outbox row only (the run in flight); dispatched/delivered -> running, records
-- the worker and renews the lease (the job's timeout from p_now). Its bucket: on a database with
-- buckets (Citus), the one its id carries (cronbox.run_bucket), every statement on that bucket's
-- rows; a run not there (an id drawn without its bucket) is looked up by key over every bucket,
-- without a lock, then locked in its bucket. Plain PostgreSQL: no bucket filter (one bucket).
CREATE OR REPLACE FUNCTION cronbox.start_run_try(
    p_run_id bigint,
    p_worker text,
    p_now timestamptz,
    OUT deadline timestamptz,
    OUT code text,
    OUT error text
)
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_run cronbox.outbox;
    v_state text;
    v_bucket integer;  -- the run's bucket; NULL: no buckets (plain PostgreSQL)
BEGIN
    -- the owner rule (cronbox.caller_hidden_runs: NULL for every worker, at once): another
    -- owner's run is an unknown run to a limited caller
    IF cronbox.caller_hidden_runs(ARRAY[p_run_id]) <> '{}' THEN
        code := 'P0002';
        error := format('run_id: no run %s', p_run_id);
        RETURN;
    END IF;
    IF to_regclass('cronbox.bucket') IS NOT NULL THEN
        -- (-1, no bucket's: an id whose bits name no bucket, looked up below)
        v_bucket := coalesce(cronbox.run_bucket(p_run_id), -1);
    END IF;
    -- The run in flight is its outbox row (by key); a run not there is final, or unknown.
    SELECT * INTO v_run FROM cronbox.outbox o
    WHERE (v_bucket IS NULL OR o.bucket = v_bucket) AND o.outbox_id = p_run_id AND o.kind = 'run'
    FOR UPDATE;
    IF NOT FOUND AND v_bucket IS NOT NULL THEN  -- an id drawn without its bucket: found by key, then locked there
        SELECT o.bucket INTO v_bucket FROM cronbox.outbox o WHERE o.outbox_id = p_run_id AND o.kind = 'run';
        IF v_bucket IS NOT NULL THEN
            SELECT * INTO v_run FROM cronbox.outbox o
            WHERE o.bucket = v_bucket AND o.outbox_id = p_run_id AND o.kind = 'run' FOR UPDATE;
        END IF;
    END IF;
    IF v_run.outbox_id IS NULL THEN
        SELECT r.state INTO v_state FROM cronbox.run r WHERE r.run_id = p_run_id;
        IF NOT FOUND THEN
            code := 'P0002';
            error := format('run_id: no run %s', p_run_id);
        ELSE
            code := '55000';
            error := format('run_id: run %s is %s, it cannot be started', p_run_id, v_state);
        END IF;
        RETURN;
    END IF;
    IF v_run.state = 'running' AND v_run.worker = p_worker AND NOT v_run.cancel_requested THEN
        deadline := v_run.run_lease_until;
        RETURN;
    END IF;
    IF v_run.state NOT IN ('dispatched', 'delivered') THEN
        code := '55000';
        error := format('run_id: run %s is %s, it cannot be started', v_run.outbox_id,
                        v_run.state || CASE WHEN v_run.state = 'running' THEN format(' on worker %s', v_run.worker) ELSE '' END);
        RETURN;
    END IF;
    IF v_run.cancel_requested THEN
        code := '55000';
        error := format('run_id: run %s was asked to cancel, it cannot be started', v_run.outbox_id);
        RETURN;
    END IF;
    deadline := p_now + coalesce((SELECT j.timeout FROM cronbox.job j
                                    WHERE j.bucket = v_run.bucket AND j.job_id = v_run.job_id),
                                   interval '5 minutes');
    -- The run's lease only. A run started before any relay's ack (a fast worker) keeps its
    -- delivery open (delivered_at NULL, the relay's lease in lease_until): the relay that sent
    -- it acks it (with the worker's answer, or 202), and if that relay dies first another
    -- sends it again after the relay's lease, as for any message never acked (the kit drops
    -- the duplicate, answering with the outcome it has).
    UPDATE cronbox.outbox o SET
        state = 'running', started_at = p_now, worker = p_worker,
        run_lease_until = deadline
    WHERE o.bucket = v_run.bucket AND o.outbox_id = v_run.outbox_id;
END
$$;

COMMENT ON FUNCTION cronbox.start_run_try(bigint, text, timestamp with time zone) IS
'Internal: start_run''s work for one run, its refusal returned (code P0002 or 55000, error) instead of raised; used by start_run_at and start_runs.';

ALTER FUNCTION cronbox.start_run_try(bigint, text, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.start_run_try(bigint, text, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
