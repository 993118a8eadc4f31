-- cronbox.add_dependency(job, upstream, within, wait_timeout): gate a scheduled job on an
-- upstream job. A due fire of `job` waits until `upstream` has a success no older than
-- `within` (NULL: since this job's previous fire); past `wait_timeout` (NULL: forever) the
-- fire fails with a clear error and a notification. Calling it again updates within and
-- wait_timeout. Rejects a cycle (named in the error, SQLSTATE 22023) under a transaction
-- advisory lock that serialises dependency changes. Records the change in the change log.
-- Thin wrapper: the body is cronbox.add_dependency_at (internal/add_dependency_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.add_dependency(
    job text,
    upstream text,
    within interval DEFAULT NULL::interval,
    wait_timeout interval DEFAULT NULL::interval
) RETURNS void
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT cronbox.add_dependency_at($1, $2, $3, $4, now())
$$;

COMMENT ON FUNCTION cronbox.add_dependency(text, text, interval, interval) IS
'Gates job on upstream: a due fire waits for an upstream success no older than within (NULL: since the job''s previous fire), failing with a notification after wait_timeout. Rejects cycles, naming them.';

ALTER FUNCTION cronbox.add_dependency(text, text, interval, interval) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.add_dependency(text, text, interval, interval) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.add_dependency(text, text, interval, interval) TO cronbox_admin, cronbox_user;
