-- cronbox.assert_job_name(field, value): a job name given to pause, resume, trigger,
-- unschedule, add_dependency, remove_dependency: not NULL (22004), 1 to 200 characters (22023),
-- the same rule schedule() applies when it creates the name. Pure.
CREATE OR REPLACE FUNCTION cronbox.assert_job_name(p_field text, p_value text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_value IS NULL THEN
        RAISE EXCEPTION '%: must not be NULL', p_field USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF length(p_value) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION '%: must be 1 to 200 characters, got %', p_field, length(p_value)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

COMMENT ON FUNCTION cronbox.assert_job_name(text,text) IS
'Internal argument check: a job name is not NULL (22004) and 1 to 200 characters (22023).';

ALTER FUNCTION cronbox.assert_job_name(text,text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.assert_job_name(text,text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
