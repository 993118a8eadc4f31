-- cronbox.upcoming_fires: fires the poller has materialised and not yet dispatched, per job,
-- with why a held one waits. The web console's "next fires" list reads it. Joined on (bucket,
-- job_id): one shard's join on Citus.
DROP VIEW IF EXISTS cronbox.upcoming_fires;
CREATE VIEW cronbox.upcoming_fires AS
SELECT j.name AS job, f.fire_at, f.due_at, f.origin, f.attempt, f.hold, f.hold_until,
       j.timezone, f.job_id, f.future_id,
       -- what a held fire waits for: the queue (queue_limit) or the pool (pool) it is held on
       CASE f.hold WHEN 'pool' THEN 'pool ' || f.hold_queue WHEN 'queue_limit' THEN 'queue ' || f.hold_queue END AS waiting_for
FROM cronbox.job_future f JOIN cronbox.job j ON j.bucket = f.bucket AND j.job_id = f.job_id;
COMMENT ON VIEW cronbox.upcoming_fires IS 'Materialised fires not yet dispatched (job, logical fire time, due time, origin, hold reason, the queue or pool it waits for); the poller keeps them a horizon ahead.';
