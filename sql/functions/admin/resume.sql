-- cronbox.resume(name, reason): un-pauses a job. Under the job's row lock it moves the
-- frontier to now(), so the job continues with its first regular fire after now(): fires that
-- fell inside the pause are skipped, not caught up. Exception: a one-off (`at`) whose time
-- passed during the pause is handed to its catch-up policy (default 'latest': it fires now).
-- A pause with until => ... is ended early (paused_until cleared).
-- Returns false if the job was not paused (nothing written). Unknown name: P0002.
-- Thin wrapper: the body is cronbox.resume_at (internal/resume_at.sql), called with now();
-- errors are re-raised from here so psql shows one CONTEXT line (docs/sql.md, "Errors").
CREATE OR REPLACE FUNCTION cronbox.resume(
    name text,
    reason text DEFAULT 'resumed by operator'::text
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
    RETURN cronbox.resume_at($1, $2, NULL, NULL, now());
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

COMMENT ON FUNCTION cronbox.resume(text, text) IS
'Resumes a paused job from now(): the fires that fell inside the pause are skipped (a one-off whose time passed goes to its catch-up policy). Returns false if the job was not paused.';

ALTER FUNCTION cronbox.resume(text, text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.resume(text, text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.resume(text, text) TO cronbox_admin, cronbox_user;
