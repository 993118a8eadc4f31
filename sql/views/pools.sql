-- cronbox.pools: resource pools (cronbox.set_pool): capacity, units held by runs in flight,
-- free units, and the fires waiting for units (on_unavailable 'wait'; those of 'retry' wait
-- as ready fires due later). in_use may exceed capacity after a lowered capacity: free is 0
-- until enough runs end.
DROP VIEW IF EXISTS cronbox.pools;
CREATE VIEW cronbox.pools AS
SELECT p.name, p.capacity, p.in_use, greatest(p.capacity - p.in_use, 0) AS free,
       coalesce(w.waiting, 0) AS waiting, w.oldest_wait, p.updated_at, p.updated_by
FROM cronbox.pool p
LEFT JOIN LATERAL (
    SELECT count(*) AS waiting, now() - min(coalesce(f.held_since, f.due_at)) AS oldest_wait
    FROM cronbox.job_future f
    WHERE f.hold = 'pool' AND f.hold_queue = p.name) w ON true;
COMMENT ON VIEW cronbox.pools IS 'Resource pools: capacity, units in use by runs in flight, free units, fires waiting for units and how long the oldest has waited.';
GRANT SELECT ON cronbox.pools TO cronbox_capacity;
