-- cronbox.trigger(name, payload, reason): run a job now, outside its schedule. Inserts
-- one manual future due at now() (payload, when given, replaces the job's for this run only);
-- the schedule's own fires are unchanged. It runs even while the job is paused (an explicit
-- request; the job stays paused); overlap, retry, dependency gates and queue limits apply as
-- for any fire. Returns the future id (the run id exists once dispatch takes it). Unknown
-- name: P0002.
-- Thin wrapper: the body is cronbox.trigger_at (internal/trigger_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.trigger(
    name text,
    payload jsonb DEFAULT NULL::jsonb,
    reason text DEFAULT 'triggered by operator'::text
) RETURNS bigint
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT cronbox.trigger_at($1, $2, $3, now())
$$;

COMMENT ON FUNCTION cronbox.trigger(text, jsonb, text) IS
'Runs a job now, outside its schedule: inserts a manual future due at once (payload, when given, is used for this run only). It runs even while the job is paused (the job stays paused); overlap, retry, dependency gates and queue limits apply as for any fire. The run shows in cronbox.runs with origin manual. Returns the future id. Unknown name: P0002.';

ALTER FUNCTION cronbox.trigger(text, jsonb, text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.trigger(text, jsonb, text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.trigger(text, jsonb, text) TO cronbox_admin, cronbox_user;
