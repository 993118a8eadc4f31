-- cronbox.assert_positive(field, value): raises 22004 for NULL and 22023
-- '<field>: must be a positive interval, got <value>' for zero or negative intervals.
-- Pure: no reads, no locks.
CREATE OR REPLACE FUNCTION cronbox.assert_positive(p_field text, p_value interval) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM cronbox.assert_not_null(p_field, p_value);
    IF p_value <= interval '0' THEN
        RAISE EXCEPTION '%: must be a positive interval, got %', p_field, p_value
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

COMMENT ON FUNCTION cronbox.assert_positive(text,interval) IS
'Internal argument check: raises 22004 for NULL and 22023 "<field>: must be a positive interval, got ..." for zero or negative intervals.';

ALTER FUNCTION cronbox.assert_positive(text,interval) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.assert_positive(text,interval) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
