-- cronbox.resume_paused(p_limit, p_bucket): the poller's reaper ends pauses whose until has passed
-- (pause(name, reason, until => ...)). Up to p_limit jobs from job_paused_until_idx, locked
-- FOR UPDATE SKIP LOCKED (two pollers take disjoint jobs), each resumed through
-- cronbox.resume_at from its until time, logged as 'resumed' by 'cronbox'. Idempotent: a job
-- resumed or re-paused meanwhile is left alone. Returns how many jobs were resumed.
-- p_bucket: the jobs of that bucket only (a poller leasing buckets: those it holds); NULL:
-- every bucket.
-- Thin wrapper: the body is cronbox.resume_paused_at (internal/resume_paused_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.resume_paused(
    p_limit integer DEFAULT 1000,
    p_bucket integer DEFAULT NULL
) RETURNS integer
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT cronbox.resume_paused_at(cronbox.checked_limit('p_limit', $1, 100000), $2, now())
$$;

COMMENT ON FUNCTION cronbox.resume_paused(integer, integer) IS
'Poller: resumes up to p_limit jobs paused with until => ... whose time has passed, through the same code as resume(), from that time; the change log says resumed automatically, by cronbox. p_bucket: that bucket''s only (NULL: every bucket). Returns the count.';

ALTER FUNCTION cronbox.resume_paused(integer, integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.resume_paused(integer, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.resume_paused(integer, integer) TO cronbox_process;
