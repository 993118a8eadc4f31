-- cronbox.trigger(name, payload, reason): run a job now, outside its schedule. Inserts
-- one manual future due at now() (payload, when given, replaces the job's for this run only)
-- and decides it in the same transaction with dispatch's own write (cronbox.dispatch_locked):
-- dispatched, skipped or held as the poller would, so only the relay hop remains. The
-- schedule's own fires are unchanged. It runs even while the job is paused (an explicit
-- request; the job stays paused); overlap, retry, dependency gates and queue limits apply as
-- for any fire. Returns the future id (cronbox.runs shows the run). Unknown name: P0002.
-- Thin wrapper: the body is cronbox.trigger_at (internal/trigger_at.sql), called with now();
-- errors are re-raised from here so psql shows one CONTEXT line (docs/sql.md, "Errors").
CREATE OR REPLACE FUNCTION cronbox.trigger(
    name text,
    payload jsonb DEFAULT NULL::jsonb,
    reason text DEFAULT 'triggered by operator'::text
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
    RETURN cronbox.trigger_at($1, $2, $3, now());
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

COMMENT ON FUNCTION cronbox.trigger(text, jsonb, text) IS
'Runs a job now, outside its schedule: inserts a manual future due at once (payload, when given, is used for this run only) and decides it in the same transaction with dispatch''s own write: dispatched, skipped or held as the poller would. It runs even while the job is paused (the job stays paused); overlap, retry, dependency gates and queue limits apply as for any fire. The run shows in cronbox.runs with origin manual. Returns the future id. Unknown name: P0002.';

ALTER FUNCTION cronbox.trigger(text, jsonb, text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.trigger(text, jsonb, text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.trigger(text, jsonb, text) TO cronbox_admin, cronbox_user;
