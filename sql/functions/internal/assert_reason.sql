-- cronbox.assert_reason(value): a change-log reason (pause, resume, unschedule, trigger,
-- schedule): NULL (default text) or at most 1000 characters (22023). Pure.
CREATE OR REPLACE FUNCTION cronbox.assert_reason(p_value text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF length(p_value) > 1000 THEN
        RAISE EXCEPTION 'reason: must be at most 1000 characters, got %', length(p_value)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

COMMENT ON FUNCTION cronbox.assert_reason(text) IS
'Internal argument check: a reason is at most 1000 characters (22023).';

ALTER FUNCTION cronbox.assert_reason(text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.assert_reason(text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
