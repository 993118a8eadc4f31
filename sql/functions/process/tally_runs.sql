-- cronbox.tally_runs(p_batch): counts finished runs per minute, queue and owner into
-- cronbox.run_minute for the web console's overview (cronbox.run_minutes). Reads the runs
-- created since the last tally and up to 30 seconds ago (a dispatch transaction still open
-- is given that long to commit), at most p_batch (1..1,000,000) of them, by primary key;
-- unfinished ones are counted when they finish (at most p_batch of them looked at per call,
-- in turn). Off the hot path: the poller's maintenance calls it every minute, again at once
-- while it returns p_batch. Locks the tally mark (one tally at a time); idempotent in effect
-- (each run is counted once). Returns the larger of the new and the pending runs read.
-- Thin wrapper: the body is cronbox.tally_runs_at (internal/tally_runs_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.tally_runs(
    p_batch integer DEFAULT 100000
) RETURNS integer
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT cronbox.tally_runs_at(cronbox.checked_limit('p_batch', $1, 1000000), now())
$$;

COMMENT ON FUNCTION cronbox.tally_runs(integer) IS
'Counts finished runs per minute, queue and owner into cronbox.run_minute (the console''s overview), reading runs created since the last tally up to 30 s ago, at most p_batch (1..1000000); unfinished ones are counted when they finish (at most p_batch of them looked at per call, in turn). The poller''s maintenance calls it every minute. Returns the larger of the new and the pending runs read (p_batch: call again).';

ALTER FUNCTION cronbox.tally_runs(integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.tally_runs(integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.tally_runs(integer) TO cronbox_process;
