-- cronbox.set_queue_limit(queue, max_running): caps the unfinished (dispatched,
-- delivered, running) runs of a queue, like an Airflow pool. Fires beyond the cap are held
-- and go, in priority order, as slots free. NULL max_running removes the cap (held fires are
-- released). Locks the queue's limit row, recounts its unfinished runs from cronbox.run, and
-- releases as many held fires as there are free slots. Returns the unfinished runs counted.
-- Thin wrapper: the body is cronbox.set_queue_limit_at (internal/set_queue_limit_at.sql), called with now();
-- errors are re-raised from here so psql shows one CONTEXT line (docs/sql.md, "Errors").
CREATE OR REPLACE FUNCTION cronbox.set_queue_limit(
    queue text,
    max_running integer
) RETURNS integer
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
    RETURN cronbox.set_queue_limit_at($1, $2, now());
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

COMMENT ON FUNCTION cronbox.set_queue_limit(text, integer) IS
'Caps the unfinished runs of a queue at max_running (NULL removes the cap); fires beyond it are held and go in priority order as slots free. Returns the unfinished runs counted now.';

ALTER FUNCTION cronbox.set_queue_limit(text, integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.set_queue_limit(text, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.set_queue_limit(text, integer) TO cronbox_admin;
