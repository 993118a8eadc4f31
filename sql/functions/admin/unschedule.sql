-- cronbox.unschedule(name, reason): removes a job and its pending futures (ON DELETE
-- CASCADE); run history and the change log stay (they have no foreign key to the job).
-- Takes the job's row lock, so it waits for a poller's saturation pass on that job to commit.
-- Returns false (and writes nothing) when no job has that name: safe to call twice.
-- Thin wrapper: the body is cronbox.unschedule_at (internal/unschedule_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.unschedule(
    name text,
    reason text DEFAULT 'unscheduled by operator'::text
) RETURNS boolean
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT cronbox.unschedule_at($1, $2, now())
$$;

COMMENT ON FUNCTION cronbox.unschedule(text, text) IS
'Removes the job and its pending futures atomically; run history and the change log stay. Returns false if no job has that name.';

ALTER FUNCTION cronbox.unschedule(text, text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.unschedule(text, text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.unschedule(text, text) TO cronbox_admin, cronbox_user;
