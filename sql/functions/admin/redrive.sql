-- cronbox.redrive(id, queue, everything): puts dead letters back into the outbox
-- (attempts reset, claimable now) and wakes the relays. Choose rows by dead_letter id, by
-- queue, or everything => true; id and queue combine with AND. A run that was marked
-- 'undeliverable' goes back to dispatched (job_stat.active_runs follows). One statement per table.
-- Returns the number of messages put back.
-- Thin wrapper: the body is cronbox.redrive_at (internal/redrive_at.sql), called with now();
-- errors are re-raised from here so psql shows one CONTEXT line (docs/sql.md, "Errors").
CREATE OR REPLACE FUNCTION cronbox.redrive(
    id bigint DEFAULT NULL::bigint,
    queue text DEFAULT NULL::text,
    everything boolean DEFAULT false
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
    RETURN cronbox.redrive_at($1, $2, $3, now());
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

COMMENT ON FUNCTION cronbox.redrive(bigint, text, boolean) IS
'Puts dead letters back into the outbox (attempts reset): by id, by queue, or everything => true. Runs marked undeliverable go back to dispatched. Returns the count.';

ALTER FUNCTION cronbox.redrive(bigint, text, boolean) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.redrive(bigint, text, boolean) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.redrive(bigint, text, boolean) TO cronbox_admin;
