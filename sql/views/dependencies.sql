-- cronbox.dependencies: every edge between jobs, both kinds: 'gate' (cronbox.add_dependency:
-- a due run waits for its upstream) and 'after' (schedule(after => ...): fired by upstreams).
-- The upstreams are read as a subquery of the upstream jobs only (the edges' tables): on Citus a
-- job and its upstream may be in two buckets, and Citus joins two of their rows only through
-- such a subquery, read first into an intermediate result. On one primary it is a semi-join.
DROP VIEW IF EXISTS cronbox.dependencies;
CREATE VIEW cronbox.dependencies AS
SELECT j.name AS job, u.name AS upstream, 'gate'::text AS kind, d.within, d.wait_timeout,
       d.job_id, d.upstream_id
FROM cronbox.job_dependency d
JOIN cronbox.job j ON j.job_id = d.job_id
JOIN (SELECT x.job_id, x.name FROM cronbox.job x
      WHERE x.job_id IN (SELECT e.upstream_id FROM cronbox.job_dependency e)) u ON u.job_id = d.upstream_id
UNION ALL
SELECT j.name, a.upstream, 'after', NULL, NULL, j.job_id, u.job_id
FROM cronbox.job j
CROSS JOIN LATERAL unnest(j.after) AS a(upstream)
LEFT JOIN (SELECT x.job_id, x.name FROM cronbox.job x
           WHERE x.name IN (SELECT e.upstream FROM cronbox.job_after_edge e)) u ON u.name = a.upstream
WHERE j.after IS NOT NULL;
COMMENT ON VIEW cronbox.dependencies IS 'Edges between jobs: gate (add_dependency: runs wait for the upstream) and after (fired when all upstreams succeeded).';
