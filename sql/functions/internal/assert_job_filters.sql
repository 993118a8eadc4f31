-- cronbox.assert_job_filters(p_queue, p_owner, p_name_like): the filters of a bulk pause or
-- resume checked before anything is read or written: at least one of queue (a queue name as
-- schedule() takes it), owner (a role name, 1..63 characters) and name_like (a LIKE pattern,
-- 1..200 characters, not ending in an escaping backslash) (22004 none given, 22023 bad value).
-- No locks, no writes.
CREATE OR REPLACE FUNCTION cronbox.assert_job_filters(p_queue text, p_owner text, p_name_like text) RETURNS void
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_queue IS NULL AND p_owner IS NULL AND p_name_like IS NULL THEN
        RAISE EXCEPTION 'queue: give queue, owner or name_like (at least one) to choose the schedules'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_queue IS NOT NULL THEN
        PERFORM cronbox.assert_queue_name('queue', p_queue);
    END IF;
    IF length(p_owner) NOT BETWEEN 1 AND 63 THEN
        RAISE EXCEPTION 'owner: must be a role name of 1 to 63 characters, got % characters', length(p_owner)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF length(p_name_like) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'name_like: must be a LIKE pattern of 1 to 200 characters, got % characters', length(p_name_like)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_name_like ~ '(^|[^\\])(\\\\)*\\$' THEN
        RAISE EXCEPTION 'name_like: must not end with an escaping backslash, got %', quote_literal(p_name_like)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

END
$$;

COMMENT ON FUNCTION cronbox.assert_job_filters(text, text, text) IS
'Internal: checks the filters of a bulk pause or resume (queue, owner, name_like: at least one, each within its bound); 22004 or 22023 naming the parameter.';

ALTER FUNCTION cronbox.assert_job_filters(text, text, text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.assert_job_filters(text, text, text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
