-- cronbox.resume(name, reason): un-pauses a job. Under the job's row lock it moves the
-- frontier to now(), so the job continues with its first regular fire after now(): fires that
-- fell inside the pause are skipped, not caught up. Exception: a one-off (`at`) whose time
-- passed during the pause is handed to its catch-up policy (default 'latest': it fires now).
-- Returns false if the job was not paused (nothing written). Unknown name: P0002.
-- Thin wrapper: the body is cronbox.resume_at (internal/resume_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.resume(
    name text,
    reason text DEFAULT 'resumed by operator'::text
) RETURNS boolean
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT cronbox.resume_at($1, $2, now())
$$;

COMMENT ON FUNCTION cronbox.resume(text, text) IS
'Resumes a paused job from now(): the fires that fell inside the pause are skipped (a one-off whose time passed goes to its catch-up policy). Returns false if the job was not paused.';

ALTER FUNCTION cronbox.resume(text, text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.resume(text, text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.resume(text, text) TO cronbox_admin, cronbox_user;
