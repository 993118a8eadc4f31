-- cronbox.assert_not_null(field, value): raises 22004 '<field>: must not be NULL' when value
-- is NULL. One of the argument checks shared by the public functions (assert_one_of,
-- assert_positive). Pure: no reads, no locks.
CREATE OR REPLACE FUNCTION cronbox.assert_not_null(p_field text, p_value anyelement) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_value IS NULL THEN
        RAISE EXCEPTION '%: must not be NULL', p_field USING ERRCODE = 'null_value_not_allowed';
    END IF;
END
$$;

COMMENT ON FUNCTION cronbox.assert_not_null(text,anyelement) IS
'Internal argument check: raises 22004 "<field>: must not be NULL" when the value is NULL.';

ALTER FUNCTION cronbox.assert_not_null(text,anyelement) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.assert_not_null(text,anyelement) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
