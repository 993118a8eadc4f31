-- cronbox.pools: resource pools (cronbox.set_pool): capacity, units held by runs in flight,
-- free units, and the fires waiting for units (on_unavailable 'wait'; those of 'retry' wait
-- as ready fires due later). in_use may exceed capacity after a lowered capacity: free is 0
-- until enough runs end.
DROP VIEW IF EXISTS cronbox.pools;
CREATE VIEW cronbox.pools AS
-- the pools read on their own (on Citus a reference table: joined with the distributed futures'
-- result it would be read on a node's copy over a connection of its own, as cronbox's owner,
-- who may not log in there), the waiting fires counted per pool, then joined by name (not a
-- lateral probe per pool: Citus refuses a lateral outer join from a reference table into a
-- distributed one; the same rows of job_future_pool_held_idx either way)
WITH p AS MATERIALIZED (
    SELECT p.name, p.capacity, p.in_use, p.updated_at, p.updated_by FROM cronbox.pool p
),
w AS (
    SELECT f.hold_queue AS pool, count(*) AS waiting, now() - min(coalesce(f.held_since, f.due_at)) AS oldest_wait
    FROM cronbox.job_future f
    WHERE f.hold = 'pool'
    GROUP BY f.hold_queue
)
SELECT p.name, p.capacity, p.in_use, greatest(p.capacity - p.in_use, 0) AS free,
       coalesce(w.waiting, 0) AS waiting, w.oldest_wait, p.updated_at, p.updated_by
FROM p
LEFT JOIN w ON w.pool = p.name;
COMMENT ON VIEW cronbox.pools IS 'Resource pools: capacity, units in use by runs in flight, free units, fires waiting for units and how long the oldest has waited.';
GRANT SELECT ON cronbox.pools TO cronbox_capacity;
