-- cronbox.metrics_gauges(now()): the database-wide gauges the processes export on /metrics:
-- outbox depth and oldest message age per queue, paused schedules, unfinished runs per state.
-- Reads only small or partially indexed sets (outbox is a hot, short table; job_paused_idx;
-- cronbox.unfinished_runs: the outbox and the leases), takes no lock. Called every few seconds by each process that serves
-- /metrics, so it must stay cheap with a million schedules.
-- Thin wrapper: the body is cronbox.metrics_gauges_at (internal/metrics_gauges_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.metrics_gauges() RETURNS TABLE(metric text, label text, value double precision)
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT * FROM cronbox.metrics_gauges_at(now())
$$;

COMMENT ON FUNCTION cronbox.metrics_gauges() IS
'Metrics: database-wide gauges for /metrics (outbox depth and oldest age per queue, paused schedules, unfinished runs per state). Cheap, lock-free.';

ALTER FUNCTION cronbox.metrics_gauges() OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.metrics_gauges() FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.metrics_gauges() TO cronbox_process;
