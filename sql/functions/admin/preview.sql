-- cronbox.preview(cron | every, timezone, starts_at, n, exclude): the next n fire times (after
-- now) that a schedule with this definition would get, computed as the poller computes them
-- (the SQL fire engine cronbox.cron_fires, proven to agree with poller/cron.py by
-- tests/test_preview_engine.py), without the fires the named exclusion calendars drop.
-- Arguments are checked as schedule() checks them; n is 1..1000; at most 10 years ahead.
-- Writes nothing, takes no lock.
-- Thin wrapper: the body is cronbox.preview_at (internal/preview_at.sql), called with now();
-- errors are re-raised from here so psql shows one CONTEXT line (docs/sql.md, "Errors").
CREATE OR REPLACE FUNCTION cronbox.preview(
    cron text DEFAULT NULL::text,
    every interval DEFAULT NULL::interval,
    timezone text DEFAULT 'UTC'::text,
    starts_at timestamp with time zone DEFAULT NULL::timestamp with time zone,
    n integer DEFAULT 10,
    exclude text DEFAULT NULL::text
) RETURNS TABLE(fire_at timestamp with time zone)
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
    RETURN QUERY SELECT * FROM cronbox.preview_at($1, $2, $3, $4, $5, $6, now());
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

COMMENT ON FUNCTION cronbox.preview(text, interval, text, timestamp with time zone, integer, text) IS
'The next n fire times (after now) of a schedule with this definition (exactly one of cron, every), as the poller computes them (same DST rule), without the fires the named exclusion calendars (exclude: one name or a comma-separated list) drop. Arguments are checked as schedule() checks them; n 1..1000; at most 10 years ahead. Writes nothing. See docs/schedules.md.';

ALTER FUNCTION cronbox.preview(text, interval, text, timestamp with time zone, integer, text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.preview(text, interval, text, timestamp with time zone, integer, text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.preview(text, interval, text, timestamp with time zone, integer, text) TO cronbox_admin, cronbox_user;
