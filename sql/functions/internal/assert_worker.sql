-- cronbox.assert_worker(value): the worker name a worker function was given: NULL allowed
-- (anonymous), else 1 to 200 characters without control characters nor invisible formatting
-- ones: bidi controls, zero-width (22023). Pure.
CREATE OR REPLACE FUNCTION cronbox.assert_worker(p_value text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_value IS NOT NULL AND (length(p_value) NOT BETWEEN 1 AND 200 OR p_value ~ '[[:cntrl:]]'
                                OR p_value ~ E'[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]') THEN
        RAISE EXCEPTION 'worker: must be 1 to 200 characters without control or invisible formatting characters (bidi controls, zero-width), got % characters', length(p_value)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

COMMENT ON FUNCTION cronbox.assert_worker(text) IS
'Internal argument check: worker is NULL or 1 to 200 characters without control characters nor bidi/zero-width formatting characters (22023).';

ALTER FUNCTION cronbox.assert_worker(text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.assert_worker(text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
