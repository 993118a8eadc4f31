-- cronbox.assert_at_most(field, value, bound): raises 22023 '<field>: must be at most <bound>,
-- got <value>' for an interval above its documented bound (NULL passes: callers check NULL
-- where it matters). Bounds keep later arithmetic (now() + value) far from timestamp overflow.
-- Pure: no reads, no locks.
CREATE OR REPLACE FUNCTION cronbox.assert_at_most(p_field text, p_value interval, p_bound interval) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_value > p_bound THEN
        RAISE EXCEPTION '%: must be at most %, got %', p_field, p_bound, p_value
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

COMMENT ON FUNCTION cronbox.assert_at_most(text,interval,interval) IS
'Internal argument check: raises 22023 "<field>: must be at most <bound>, got ..." for an interval above its bound.';

ALTER FUNCTION cronbox.assert_at_most(text,interval,interval) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.assert_at_most(text,interval,interval) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
