-- cronbox.ensure_run_partitions(p_days_ahead): creates the daily partitions of
-- cronbox.run (UTC days) from yesterday up to p_days_ahead days after now().
-- p_days_ahead: 1 to 366 (a larger value would create a table per day). Idempotent
-- (existing partitions are left alone); takes an advisory lock so two pollers
-- doing maintenance at once do not race on CREATE TABLE. Returns the number created.
-- Thin wrapper: the body is cronbox.ensure_run_partitions_at (internal/ensure_run_partitions_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.ensure_run_partitions(
    p_days_ahead integer DEFAULT 7
) RETURNS integer
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT cronbox.ensure_run_partitions_at(cronbox.checked_limit('p_days_ahead', $1, 366), now())
$$;

COMMENT ON FUNCTION cronbox.ensure_run_partitions(integer) IS
'Creates the daily (UTC) partitions of cronbox.run from yesterday to p_days_ahead (1..366) days ahead. Idempotent; the poller calls it at start and hourly.';

ALTER FUNCTION cronbox.ensure_run_partitions(integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.ensure_run_partitions(integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.ensure_run_partitions(integer) TO cronbox_process;
