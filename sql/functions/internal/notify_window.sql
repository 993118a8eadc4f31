-- cronbox.notify_window(): the window in which a job's repeated events reach one of its own
-- recipients (schedule(..., notify => ...)) as one message with a count: the setting
-- cronbox.notify_window (e.g. ALTER DATABASE app SET cronbox.notify_window = '30 minutes'),
-- default 10 minutes, clamped to 0 .. 1 day (0: every event its own message). Reads nothing else.
CREATE OR REPLACE FUNCTION cronbox.notify_window() RETURNS interval
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_set text := current_setting('cronbox.notify_window', true);
    v_iv interval;
BEGIN
    IF v_set IS NULL OR v_set = '' THEN
        RETURN interval '10 minutes';
    END IF;
    BEGIN
        v_iv := v_set::interval;
    EXCEPTION WHEN OTHERS THEN
        RETURN interval '10 minutes';
    END;
    RETURN least(greatest(v_iv, interval '0'), interval '1 day');
END
$$;

COMMENT ON FUNCTION cronbox.notify_window() IS
'Internal: the window in which a job''s repeated events reach one of its own recipients as one message with a count: setting cronbox.notify_window (default 10 minutes), clamped to 0 .. 1 day.';

ALTER FUNCTION cronbox.notify_window() OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.notify_window() FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
