-- cronbox.assert_queue_name(p_field, p_queue): a queue as schedule() accepts it: not NULL
-- (22004), 1 to 100 letters, digits, _ . : - starting with a letter or digit, not reserved
-- (cronbox., _cronbox: 22023). Pure.
CREATE OR REPLACE FUNCTION cronbox.assert_queue_name(p_field text, p_queue text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM cronbox.assert_not_null(p_field, p_queue);
    IF p_queue !~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$' THEN
        RAISE EXCEPTION '%: must be 1 to 100 characters of letters, digits, _ . : - (starting with a letter or digit), got %',
            p_field, quote_literal(left(p_queue, 120)) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_queue ~* '^(cronbox[.:_-]|_cronbox)' THEN
        RAISE EXCEPTION '%: queue names starting with ''cronbox.'' or ''_cronbox'' are reserved, got %',
            p_field, quote_literal(p_queue) USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

COMMENT ON FUNCTION cronbox.assert_queue_name(text, text) IS
'Internal argument check: a queue name as schedule() accepts it (22004 NULL, 22023 otherwise).';

ALTER FUNCTION cronbox.assert_queue_name(text, text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.assert_queue_name(text, text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
