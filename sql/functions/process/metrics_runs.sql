-- cronbox.metrics_runs(p_after, p_before, p_bounds): runs created with p_after < run_id <
-- p_before (run ids encode their creation time), counted per queue and outcome
-- ('dispatched', 'skipped', 'missed'), with the dispatch lag (dispatched_at - due_at, in
-- seconds) bucketed by width_bucket over p_bounds. The poller's /metrics keeps a watermark
-- and calls it every few seconds: a primary-key range scan of the newest partition, no lock.
CREATE OR REPLACE FUNCTION cronbox.metrics_runs(
    p_after bigint,
    p_before bigint,
    p_bounds double precision[]
) RETURNS TABLE (queue text, outcome text, bucket integer, runs bigint, lag_sum double precision)
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT r.queue, o.outcome,
           CASE WHEN o.outcome = 'dispatched' THEN width_bucket(o.lag, p_bounds) END,
           count(*), coalesce(sum(o.lag), 0)
    -- history, and the runs still in flight (their outbox rows), in one snapshot: a run is in
    -- exactly one of the two
    FROM (SELECT h.run_id, h.queue, h.state, h.dispatched_at, h.due_at, h.fire_at
          FROM cronbox.run h WHERE h.run_id > p_after AND h.run_id < p_before
          UNION ALL
          SELECT b.outbox_id, b.queue, b.state, b.dispatched_at, b.due_at, b.fire_at
          FROM cronbox.outbox b WHERE b.kind = 'run' AND b.outbox_id > p_after AND b.outbox_id < p_before) r,
         LATERAL (SELECT CASE WHEN r.dispatched_at IS NOT NULL THEN 'dispatched' ELSE r.state END AS outcome,
                         greatest(extract(epoch FROM r.dispatched_at - coalesce(r.due_at, r.fire_at)), 0)::double precision AS lag) o
    WHERE (r.dispatched_at IS NOT NULL OR r.state IN ('skipped', 'missed'))
    GROUP BY 1, 2, 3
$$;

COMMENT ON FUNCTION cronbox.metrics_runs(bigint,bigint,double precision[]) IS
'Metrics: runs created between two run ids per queue and outcome (dispatched, skipped, missed) with the dispatch lag bucketed over p_bounds. Feeds the poller''s counters on /metrics.';

ALTER FUNCTION cronbox.metrics_runs(bigint,bigint,double precision[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.metrics_runs(bigint,bigint,double precision[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.metrics_runs(bigint,bigint,double precision[]) TO cronbox_process;
