-- cronbox.unschedule(name, reason): removes a job and its pending futures (deleted by its
-- body: job_future has no foreign key to the job, migration 0442); run history and the change
-- log stay (they have no foreign key to the job).
-- Takes the job's lock, so it waits for a poller's saturation pass on that job to commit.
-- Returns false (and writes nothing) when no job has that name: safe to call twice.
-- Thin wrapper: the body is cronbox.unschedule_at (internal/unschedule_at.sql), called with now();
-- errors are re-raised from here so psql shows one CONTEXT line (docs/sql.md, "Errors").
CREATE OR REPLACE FUNCTION cronbox.unschedule(
    name text,
    reason text DEFAULT 'unscheduled by operator'::text
) RETURNS boolean
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
    RETURN cronbox.unschedule_at($1, $2, now());
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

COMMENT ON FUNCTION cronbox.unschedule(text, text) IS
'Removes the job and its pending futures atomically; run history and the change log stay. Returns false if no job has that name.';

ALTER FUNCTION cronbox.unschedule(text, text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.unschedule(text, text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.unschedule(text, text) TO cronbox_admin, cronbox_user;
