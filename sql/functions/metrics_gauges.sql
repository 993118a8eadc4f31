-- cronbox.metrics_gauges(p_now): the database-wide gauges the processes export on /metrics:
-- outbox depth and oldest message age per queue, paused schedules, unfinished runs per state.
-- Reads only small or partially indexed sets (outbox is a hot, short table; job_paused_idx;
-- run_active_job_idx), takes no lock. Called every few seconds by each process that serves
-- /metrics, so it must stay cheap with a million schedules.
CREATE OR REPLACE FUNCTION cronbox.metrics_gauges(p_now timestamptz DEFAULT now())
RETURNS TABLE (metric text, label text, value double precision)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT 'outbox_depth', o.queue, count(*)::double precision
    FROM cronbox.outbox o GROUP BY o.queue
    UNION ALL
    SELECT 'outbox_oldest_age_seconds', o.queue,
           greatest(extract(epoch FROM p_now - min(o.created_at)), 0)::double precision
    FROM cronbox.outbox o GROUP BY o.queue
    UNION ALL
    SELECT 'schedules_paused', NULL, count(*)::double precision
    FROM cronbox.job j WHERE j.paused
    UNION ALL
    SELECT 'runs_active', s.state,
           (SELECT count(*) FROM cronbox.run r WHERE r.state = s.state)::double precision
    FROM unnest(ARRAY['dispatched', 'delivered', 'running']) AS s(state)
$$;

COMMENT ON FUNCTION cronbox.metrics_gauges(timestamptz) IS
'Metrics: database-wide gauges for /metrics (outbox depth and oldest age per queue, paused schedules, unfinished runs per state). Cheap, lock-free.';
