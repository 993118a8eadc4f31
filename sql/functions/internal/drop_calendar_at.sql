-- Internal: the body of cronbox.drop_calendar, with the time as its last parameter p_now.
-- The public cronbox.drop_calendar passes now(); no cronbox role may execute this one.
-- cronbox.drop_calendar_at(name, p_now): deletes an exclusion calendar. Refused (55000) while
-- a schedule uses it: remove it from those schedules first (schedule(..., exclude => ...)).
-- Returns false if no such calendar (or not the caller's: row security). Locks the calendar.
CREATE OR REPLACE FUNCTION cronbox.drop_calendar_at(
    name  text,
    p_now timestamptz DEFAULT now()
) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id bigint;
    v_users text;
    v_count bigint;
BEGIN
    PERFORM cronbox.assert_not_null('name', drop_calendar_at.name);
    IF length(drop_calendar_at.name) > 200 THEN
        RAISE EXCEPTION 'name: must be at most 200 characters, got %', length(drop_calendar_at.name)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT c.calendar_id INTO v_id FROM cronbox.calendar c WHERE c.name = drop_calendar_at.name FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    -- Key share on the links' jobs is taken by the foreign key; the check says who uses it.
    SELECT count(*), string_agg(quote_literal(s.name), ', ') INTO v_count, v_users
    FROM (SELECT j.name FROM cronbox.job_calendar jc JOIN cronbox.job j ON j.job_id = jc.job_id
          WHERE jc.calendar_id = v_id ORDER BY j.name LIMIT 5) s;
    IF v_count > 0 THEN
        SELECT count(*) INTO v_count FROM cronbox.job_calendar jc WHERE jc.calendar_id = v_id;
        RAISE EXCEPTION 'name: calendar % is used by % schedule(s) (%); remove it from them first',
            quote_literal(drop_calendar_at.name), v_count, v_users
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    DELETE FROM cronbox.calendar c WHERE c.calendar_id = v_id;
    RETURN true;
END
$$;

COMMENT ON FUNCTION cronbox.drop_calendar_at(text, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.drop_calendar(text) with the time as p_now. Deletes an exclusion calendar; 55000 while a schedule uses it; false if there is no such calendar.';

ALTER FUNCTION cronbox.drop_calendar_at(text, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.drop_calendar_at(text, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
