-- cronbox.checked_limit(field, value, max): value when it is between 1 and max; raises 22004
-- for NULL and 22023 '<field>: must be between 1 and <max>, got <value>' otherwise. Used by
-- the process functions' wrappers for their batch sizes (a negative LIMIT would otherwise
-- fail in PostgreSQL's words). Pure.
CREATE OR REPLACE FUNCTION cronbox.checked_limit(p_field text, p_value integer, p_max integer) RETURNS integer
LANGUAGE plpgsql IMMUTABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_value IS NULL THEN
        RAISE EXCEPTION '%: must not be NULL', p_field USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_value NOT BETWEEN 1 AND p_max THEN
        RAISE EXCEPTION '%: must be between 1 and %, got %', p_field, p_max, p_value
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN p_value;
END
$$;

COMMENT ON FUNCTION cronbox.checked_limit(text,integer,integer) IS
'Internal argument check: a batch size between 1 and max (22004 NULL, 22023 out of range); returns it.';

ALTER FUNCTION cronbox.checked_limit(text,integer,integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.checked_limit(text,integer,integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
