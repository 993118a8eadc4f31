-- cronbox.create_calendar(name, dates, ranges, crons, timezone): create an exclusion calendar
-- (local dates, date ranges and cron expressions in one time zone whose fires a schedule
-- using it skips: schedule(..., exclude => name)), or replace the contents of the caller's
-- calendar of that name; the jobs that use it then get their pending futures recomputed, as
-- a schedule update does. Every argument is checked before anything is written. An
-- identical call is a no-op. Returns the calendar id.
-- Thin wrapper: the body is cronbox.create_calendar_at (internal/create_calendar_at.sql), called with now();
-- errors are re-raised from here so psql shows one CONTEXT line (docs/sql.md, "Errors").
CREATE OR REPLACE FUNCTION cronbox.create_calendar(
    name text,
    dates date[] DEFAULT NULL::date[],
    ranges daterange[] DEFAULT NULL::daterange[],
    crons text[] DEFAULT NULL::text[],
    timezone text DEFAULT 'UTC'::text
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
    RETURN cronbox.create_calendar_at($1, $2, $3, $4, $5, now());
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

COMMENT ON FUNCTION cronbox.create_calendar(text, date[], daterange[], text[], text) IS
'Creates an exclusion calendar, or replaces the contents of the caller''s calendar of that name: excluded local dates (dates), date ranges (ranges) and cron expressions matched to the minute (crons), in one time zone. A schedule using it (schedule(..., exclude => name)) records the fires it matches as skipped instead of running them; changing it recomputes those schedules'' pending fires. Bounds: name 1..100 of A-Z a-z 0-9 _ . : -; at most 10000 dates, 1000 ranges, 100 crons; dates 1970..2199. Returns the calendar id. See docs/schedules.md.';

ALTER FUNCTION cronbox.create_calendar(text, date[], daterange[], text[], text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.create_calendar(text, date[], daterange[], text[], text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.create_calendar(text, date[], daterange[], text[], text) TO cronbox_admin, cronbox_user;
