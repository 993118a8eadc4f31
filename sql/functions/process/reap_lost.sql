-- cronbox.reap_lost(p_limit, p_bucket): the poller's reaper. Runs delivered or running whose
-- lease expired (no heartbeat or report within the job's timeout) are declared lost (a
-- crash; cancelled if cancellation was requested) and retried per the job's policy, through
-- cronbox.finish_runs. Candidates come from run_lease_idx without locks (finish_runs locks
-- jobs before runs, the order dispatch relies on) and are re-checked under lock, so two
-- reapers never double-count a run. Returns how many runs were declared lost or cancelled.
-- p_bucket: candidates of that bucket only (a poller leasing buckets reaps those it holds);
-- NULL: every bucket.
-- Thin wrapper: the body is cronbox.reap_lost_at (internal/reap_lost_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.reap_lost(
    p_limit integer DEFAULT 1000,
    p_bucket integer DEFAULT NULL
) RETURNS integer
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
    SELECT cronbox.reap_lost_at(cronbox.checked_limit('p_limit', $1, 100000), $2, now())
$$;

COMMENT ON FUNCTION cronbox.reap_lost(integer, integer) IS
'Poller: declares up to p_limit runs whose lease expired lost (or cancelled when asked to) and applies the retry policy; p_bucket: that bucket''s runs only (NULL: every bucket). Returns the count.';

ALTER FUNCTION cronbox.reap_lost(integer, integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.reap_lost(integer, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.reap_lost(integer, integer) TO cronbox_process;
