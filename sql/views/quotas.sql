-- cronbox.quotas: each owner role's quota (cronbox.set_quota; NULL: no limit) beside what it
-- uses now: its schedules and the sum of their fire rates (docs/operations.md, "Tenants").
DROP VIEW IF EXISTS cronbox.quotas;
CREATE VIEW cronbox.quotas AS
SELECT q.owner, q.schedules, q.max_schedules,
       round(q.fire_rate::numeric, 3) AS fires_per_second, q.max_fires_per_second,
       q.top_priority, q.updated_by, q.updated_at
FROM cronbox.owner_quota q;

COMMENT ON VIEW cronbox.quotas IS
    'Per owner role: schedules and fires per second used, and the quota (max_schedules, max_fires_per_second, top_priority; NULL: no limit).';
