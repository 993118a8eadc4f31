-- cronbox.next_fires(name, n): the next n fires of an existing schedule, as the poller makes
-- them: its pending futures, then the fires computed after its frontier by the same engine
-- as preview, without the fires its exclusion calendars drop, within starts_at/ends_at and
-- what max_runs still allows. A job paused until a time shows the fires from that time on;
-- none while paused without an end (and none for an `after` job).
-- n is 1..1000; at most 10 years ahead. Writes nothing, takes no lock. Unknown name: P0002.
-- Thin wrapper: the body is cronbox.next_fires_at (internal/next_fires_at.sql), called with now();
-- errors are re-raised from here so psql shows one CONTEXT line (docs/sql.md, "Errors").
CREATE OR REPLACE FUNCTION cronbox.next_fires(
    name text,
    n integer DEFAULT 10
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
    RETURN QUERY SELECT * FROM cronbox.next_fires_at($1, $2, now());
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

COMMENT ON FUNCTION cronbox.next_fires(text, integer) IS
'The next n fires of an existing schedule, as the poller makes them: pending futures first, then fires computed by the same engine as preview, honouring its exclusion calendars, starts_at/ends_at and max_runs. Paused until a time: the fires from that time on; paused without an end: none. n 1..1000; at most 10 years ahead. Unknown name: P0002. See docs/schedules.md.';

ALTER FUNCTION cronbox.next_fires(text, integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.next_fires(text, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.next_fires(text, integer) TO cronbox_admin, cronbox_user;
