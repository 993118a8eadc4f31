-- cronbox.cancel(run_id): request cancellation of a run. A run still in the outbox
-- (dispatched) is cancelled at once and its message withdrawn (unless a relay is sending it
-- right now: the worker's start_run will then refuse it). A delivered or running run is
-- flagged: its worker's next heartbeat answers 'cancel'; it ends 'cancelled' when the worker
-- reports or its lease expires. Returns 'cancelled' or 'cancel_requested'. Raises P0002 for
-- an unknown run, 55000 for a run already final.
-- Thin wrapper: the body is cronbox.cancel_at (internal/cancel_at.sql), called with now();
-- errors are re-raised from here so psql shows one CONTEXT line (docs/sql.md, "Errors").
CREATE OR REPLACE FUNCTION cronbox.cancel(
    run_id bigint
) RETURNS text
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_state text;
    v_message text;
    v_detail text;
    v_hint text;
BEGIN
    PERFORM cronbox.carry_caller();  -- on Citus, the caller for the policies on the worker nodes
    RETURN cronbox.cancel_at($1, now());
EXCEPTION WHEN OTHERS THEN
    -- Re-raised from here so that psql shows the message and one CONTEXT line naming the
    -- function the user called, not the internal frames (docs/sql.md, "Errors"): the same
    -- SQLSTATE, message, detail and hint.
    GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_message = MESSAGE_TEXT,
                            v_detail = PG_EXCEPTION_DETAIL, v_hint = PG_EXCEPTION_HINT;
    v_hint := cronbox.error_hint(v_state, v_message, v_hint);  -- a known cause's way out, if it has none
    IF v_detail <> '' AND v_hint <> '' THEN
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message, DETAIL = v_detail, HINT = v_hint;
    ELSIF v_detail <> '' THEN
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message, DETAIL = v_detail;
    ELSIF v_hint <> '' THEN
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message, HINT = v_hint;
    END IF;
    RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message;
END
$$;

COMMENT ON FUNCTION cronbox.cancel(bigint) IS
'Requests cancellation of a run: cancelled at once while still in the outbox, otherwise flagged so the worker''s heartbeat answers ''cancel''. Returns ''cancelled'' or ''cancel_requested''; raises 55000 for a run already final.';

ALTER FUNCTION cronbox.cancel(bigint) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.cancel(bigint) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.cancel(bigint) TO cronbox_admin, cronbox_user;
