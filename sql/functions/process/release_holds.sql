-- cronbox.release_holds(p_limit, p_bucket): the backstop for held futures. Each hold carries a
-- time for a second look (hold_until: at most 30 s after it was set, a dependency's
-- wait_timeout sooner); this releases those due, so dispatch decides again (and a dependency
-- past its timeout fails). Precise wake-ups (a run finishing, an upstream succeeding,
-- resume) happen where those events are written; this bounds any miss. job_future_recheck_idx.
-- p_bucket: the held futures of that bucket only (a poller leasing buckets: those it holds); NULL:
-- every bucket.
-- Thin wrapper: the body is cronbox.release_holds_at (internal/release_holds_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.release_holds(
    p_limit integer DEFAULT 10000,
    p_bucket integer DEFAULT NULL
) RETURNS integer
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
    SELECT cronbox.release_holds_at(cronbox.checked_limit('p_limit', $1, 100000), $2, now())
$$;

COMMENT ON FUNCTION cronbox.release_holds(integer, integer) IS
'Poller backstop: releases held futures whose second-look time has come, so dispatch decides again. p_bucket: that bucket''s only (NULL: every bucket). Returns the count.';

ALTER FUNCTION cronbox.release_holds(integer, integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.release_holds(integer, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.release_holds(integer, integer) TO cronbox_process;
