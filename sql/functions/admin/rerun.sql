-- cronbox.rerun(run_id, reason): runs a finished run again: a new run of the same job, fire
-- time and payload, origin 'rerun' (attempt 1, so the job's retry policy applies afresh),
-- decided at once in this transaction through dispatch's own write (cronbox.dispatch_locked)
-- as trigger() is: dispatched, skipped or held as the poller would; it runs even while the
-- job is paused. One pending re-run per fire. Change-log action 'rerun' naming the run.
-- Returns the new run's id (NULL while it is held: queue limit, dependency gate).
-- P0002 unknown run (or one whose job is gone), 55000 a run not finished or a re-run of the
-- same fire still pending, 22004 NULL run_id, 22023 a reason over 1000 characters.
-- Thin wrapper: the body is cronbox.rerun_at (internal/rerun_at.sql), called with now();
-- errors are re-raised from here so psql shows one CONTEXT line (docs/sql.md, "Errors").
CREATE OR REPLACE FUNCTION cronbox.rerun(
    run_id bigint,
    reason text DEFAULT 'rerun by operator'::text
) RETURNS bigint
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
    RETURN cronbox.rerun_at($1, $2, now());
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

COMMENT ON FUNCTION cronbox.rerun(bigint, text) IS
'Runs a finished run (succeeded, failed, lost, cancelled, skipped) again: a new run of the same job, fire time and payload with origin rerun, decided at once as trigger() is (dispatched, skipped or held; it runs even while the job is paused). One pending re-run per fire. Change-log action rerun. Returns the new run id, NULL while it is held. P0002 unknown run, 55000 a run not finished or a re-run already pending.';

ALTER FUNCTION cronbox.rerun(bigint, text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.rerun(bigint, text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.rerun(bigint, text) TO cronbox_admin, cronbox_user;
