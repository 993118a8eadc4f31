-- cronbox.pause(name, reason, after_failure): stops a job from firing. Under the job's
-- row lock it deletes the pending scheduled futures (first attempts of regular fires) and marks
-- the job paused; the saturation index skips paused jobs. Retry and manual futures stay, held
-- by dispatch until resume. Fires that fall inside the pause are not run and not recorded.
-- Returns false if the job was already paused (nothing written). Unknown name: P0002.
-- Thin wrapper: the body is cronbox.pause_at (internal/pause_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.pause(
    name text,
    reason text DEFAULT 'paused by operator'::text,
    after_failure boolean DEFAULT false
) RETURNS boolean
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT cronbox.pause_at($1, $2, $3, now())
$$;

COMMENT ON FUNCTION cronbox.pause(text, text, boolean) IS
'Pauses a job: its pending scheduled futures are deleted atomically and no new ones are made; fires inside the pause are skipped (not run, not recorded). after_failure => true logs it as paused_after_failure. Returns false if already paused.';

ALTER FUNCTION cronbox.pause(text, text, boolean) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.pause(text, text, boolean) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.pause(text, text, boolean) TO cronbox_admin, cronbox_user;
