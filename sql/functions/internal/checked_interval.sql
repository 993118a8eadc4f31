-- cronbox.checked_interval(field, value, min, max, null_ok): the argument check of an interval
-- parameter, for thin SQL wrappers: returns the value, or raises 22004 for a NULL (unless
-- null_ok) and 22023 outside [min, max], the message starting with the field's name. A
-- bounded value can never overflow `now() + value` later. Pure; no lock, no write.
CREATE OR REPLACE FUNCTION cronbox.checked_interval(
    p_field text, p_value interval, p_min interval, p_max interval, p_null_ok boolean DEFAULT false
) RETURNS interval
LANGUAGE plpgsql IMMUTABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_value IS NULL THEN
        IF p_null_ok THEN
            RETURN NULL;
        END IF;
        RAISE EXCEPTION '%: must not be NULL', p_field USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_value < p_min OR p_value > p_max THEN
        RAISE EXCEPTION '%: must be between % and %, got %', p_field, p_min, p_max, p_value
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN p_value;
END
$$;

COMMENT ON FUNCTION cronbox.checked_interval(text, interval, interval, interval, boolean) IS
'Internal argument check: an interval between min and max (22004 NULL unless null_ok, 22023 out of range); returns it.';

ALTER FUNCTION cronbox.checked_interval(text, interval, interval, interval, boolean) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.checked_interval(text, interval, interval, interval, boolean) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
