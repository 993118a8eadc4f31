-- cronbox.assert_one_of(field, value, allowed): raises 22004 for NULL and 22023
-- '<field>: must be one of a, b, c, got ''x''' for a value outside the allowed words.
-- Pure: no reads, no locks.
CREATE OR REPLACE FUNCTION cronbox.assert_one_of(p_field text, p_value text, p_allowed text[]) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM cronbox.assert_not_null(p_field, p_value);
    IF NOT p_value = ANY (p_allowed) THEN
        RAISE EXCEPTION '%: must be one of %, got %', p_field, array_to_string(p_allowed, ', '),
            quote_literal(p_value) USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

COMMENT ON FUNCTION cronbox.assert_one_of(text,text,text[]) IS
'Internal argument check: raises 22004 for NULL and 22023 "<field>: must be one of ..., got ''x''" for a word outside the list.';

ALTER FUNCTION cronbox.assert_one_of(text,text,text[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.assert_one_of(text,text,text[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
