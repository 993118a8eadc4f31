-- Internal: the body of cronbox.metrics_gauges, with the time as its last parameter p_now. The public
-- cronbox.metrics_gauges passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.metrics_gauges_at(p_now): the database-wide gauges the processes export on /metrics:
-- outbox depth and oldest message age per queue, paused schedules, unfinished runs per state.
-- Reads only small or partially indexed sets (outbox is a hot, short table; job_paused_idx;
-- cronbox.unfinished_runs: the outbox and the leases), takes no lock. Called every few seconds by each process that serves
-- /metrics, so it must stay cheap with a million schedules.
CREATE OR REPLACE FUNCTION cronbox.metrics_gauges_at(p_now timestamptz DEFAULT now())
RETURNS TABLE (metric text, label text, value double precision)
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT 'outbox_depth', o.queue, count(*)::double precision
    FROM cronbox.outbox o WHERE coalesce(o.state, 'dispatched') = 'dispatched' GROUP BY o.queue
    UNION ALL
    SELECT 'outbox_oldest_age_seconds', o.queue,
           greatest(extract(epoch FROM p_now - min(o.created_at)), 0)::double precision
    FROM cronbox.outbox o WHERE coalesce(o.state, 'dispatched') = 'dispatched' GROUP BY o.queue
    UNION ALL
    SELECT 'schedules_paused', NULL, count(*)::double precision
    FROM cronbox.job j WHERE j.paused
    UNION ALL
    SELECT 'runs_active', s.state, count(u.run_id)::double precision
    FROM unnest(ARRAY['dispatched', 'delivered', 'running']) AS s(state)
    LEFT JOIN cronbox.unfinished_runs() u ON u.state = s.state
    GROUP BY s.state
    UNION ALL
    -- resource pools: capacity, units held by runs in flight, fires waiting for units
    SELECT m.metric, p.name, m.value
    FROM cronbox.pools p
    CROSS JOIN LATERAL (VALUES ('pool_capacity', p.capacity::double precision),
                               ('pool_in_use', p.in_use::double precision),
                               ('pool_waiting', p.waiting::double precision)) AS m(metric, value)
$$;

COMMENT ON FUNCTION cronbox.metrics_gauges_at(timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.metrics_gauges() with the time as p_now; tests use it to fix the clock. Metrics: database-wide gauges for /metrics (outbox depth and oldest age per queue, paused schedules, unfinished runs per state, resource pools'' capacity, units in use and waiting fires). Cheap, lock-free.';

ALTER FUNCTION cronbox.metrics_gauges_at(timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.metrics_gauges_at(timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
