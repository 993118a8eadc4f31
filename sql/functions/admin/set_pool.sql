-- cronbox.set_pool(name, capacity): creates a resource pool or sets its capacity in units
-- (GPUs, IPs, licences), as an administrator or the infrastructure's monitor (role
-- cronbox_capacity) reports it. A schedule's `needs => '{"gpu": 8}'` holds that many units while
-- a run is in flight. Lowered below the units in use, it takes effect as runs end; raised,
-- fires waiting for the pool start at once, in priority order. NULL capacity removes the pool
-- (refused while a schedule needs it). Returns the units in use.
-- Thin wrapper: the body is cronbox.set_pool_at (internal/set_pool_at.sql), called with now();
-- errors are re-raised from here so psql shows one CONTEXT line (docs/sql.md, "Errors").
CREATE OR REPLACE FUNCTION cronbox.set_pool(
    name text,
    capacity integer
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
    RETURN cronbox.set_pool_at($1, $2, now());
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

COMMENT ON FUNCTION cronbox.set_pool(text, integer) IS
'Creates a resource pool or sets its capacity in units (0 to 1000000000); NULL removes it (refused while a schedule needs it). Lowered, it takes effect as runs end; raised, waiting fires start at once in priority order. Returns the units in use. Callable by cronbox_admin and cronbox_capacity (the infrastructure''s monitor).';

ALTER FUNCTION cronbox.set_pool(text, integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.set_pool(text, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process, cronbox_capacity;
GRANT EXECUTE ON FUNCTION cronbox.set_pool(text, integer) TO cronbox_admin, cronbox_capacity;
