-- Internal: the body of cronbox.cancel, with the time as its last parameter p_now. The public
-- cronbox.cancel passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.cancel_at(run_id, p_now): request cancellation of a run. A run still in the outbox
-- (dispatched) is cancelled at once and its message withdrawn (unless a relay is sending it
-- right now: the worker's start_run will then refuse it). A delivered or running run is
-- flagged: its worker's next heartbeat answers 'cancel'; it ends 'cancelled' when the worker
-- reports or its lease expires. Returns 'cancelled' or 'cancel_requested'. Raises P0002 for
-- an unknown run, 55000 for a run already final.
-- Its bucket: on a database with buckets (Citus), the one its id carries (cronbox.run_bucket),
-- every statement on that bucket's rows; a run not there (an id drawn without its bucket) is
-- looked up by key over every bucket, then cancelled in its own. Plain PostgreSQL: no bucket
-- filter (one bucket).
CREATE OR REPLACE FUNCTION cronbox.cancel_at(
    run_id bigint,
    p_now timestamptz DEFAULT now()
) RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_state text;
    v_verdict text;
    v_bucket integer;  -- the run's bucket; NULL: no buckets (plain PostgreSQL)
BEGIN
    IF cancel_at.run_id IS NULL THEN
        RAISE EXCEPTION 'run_id: must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    -- The run in flight is its outbox row (by key); a run not there is final, or unknown.
    IF to_regclass('cronbox.bucket') IS NOT NULL THEN
        -- (-1, no bucket's: an id whose bits name no bucket, looked up below)
        v_bucket := coalesce(cronbox.run_bucket(cancel_at.run_id), -1);
    END IF;
    SELECT o.state INTO v_state FROM cronbox.outbox o
    WHERE (v_bucket IS NULL OR o.bucket = v_bucket) AND o.outbox_id = cancel_at.run_id AND o.kind = 'run';
    IF NOT FOUND AND v_bucket IS NOT NULL THEN  -- an id drawn without its bucket: found by key
        SELECT o.state, o.bucket INTO v_state, v_bucket FROM cronbox.outbox o
        WHERE o.outbox_id = cancel_at.run_id AND o.kind = 'run';
    END IF;
    IF v_state IS NULL THEN
        SELECT r.state INTO v_state FROM cronbox.run r WHERE r.run_id = cancel_at.run_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'run_id: no run %', cancel_at.run_id USING ERRCODE = 'no_data_found';
        END IF;
        RAISE EXCEPTION 'run_id: run % is %, there is nothing to cancel', cancel_at.run_id, v_state
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF v_state = 'dispatched' THEN
        -- not delivered yet: cancelled now (its outbox row deleted, its history row inserted)
        SELECT f.state, f.verdict INTO v_state, v_verdict
        FROM cronbox.finish_runs(ARRAY[cancel_at.run_id], 'cancelled', NULL,
                                 ARRAY['cancelled before delivery'], false, p_now, v_bucket) f;
        IF v_verdict = 'finished' THEN
            RETURN 'cancelled';
        END IF;
    END IF;
    UPDATE cronbox.outbox o SET cancel_requested = true
    WHERE (v_bucket IS NULL OR o.bucket = v_bucket) AND o.outbox_id = cancel_at.run_id AND o.kind = 'run'
    RETURNING o.state INTO v_state;
    IF FOUND THEN
        RETURN 'cancel_requested';
    END IF;
    SELECT r.state INTO v_state FROM cronbox.run r WHERE r.run_id = cancel_at.run_id;
    RAISE EXCEPTION 'run_id: run % is %, there is nothing to cancel', cancel_at.run_id, v_state
        USING ERRCODE = 'object_not_in_prerequisite_state';
END
$$;

COMMENT ON FUNCTION cronbox.cancel_at(bigint, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.cancel(bigint) with the time as p_now; tests use it to fix the clock. Requests cancellation of a run: cancelled at once while still in the outbox, otherwise flagged so the worker''s heartbeat answers ''cancel''. Returns ''cancelled'' or ''cancel_requested''; raises 55000 for a run already final.';

ALTER FUNCTION cronbox.cancel_at(bigint, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.cancel_at(bigint, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
