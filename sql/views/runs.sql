-- cronbox.runs: run history for psql, one row per attempt (a retry is a new row).
DROP VIEW IF EXISTS cronbox.runs;
CREATE VIEW cronbox.runs AS
SELECT r.run_id, r.job_name AS job, r.queue, r.fire_at, r.state, r.attempt, r.origin,
       r.priority, r.due_at, r.dispatched_at, r.delivered_at, r.started_at, r.finished_at,
       r.finished_at - coalesce(r.started_at, r.delivered_at) AS duration,
       coalesce(r.delivered_at, r.dispatched_at) - r.fire_at AS lag,
       r.lease_until, r.worker, r.cancel_requested, r.error, r.result, r.retry_of,
       r.late_report, r.run_id::text || ':' || r.attempt::text AS idempotency_key,
       r.payload, r.job_id,
       -- state 'missed': one row per gap; fire_at is its first fire
       r.missed_fires, r.missed_last_at,
       -- the state if failed, lost, cancelled, skipped or missed, else NULL: filter on it
       -- (trouble = 'failed') to read run_trouble_history_idx instead of all of history
       r.trouble
FROM cronbox.run r;
COMMENT ON VIEW cronbox.runs IS 'Run history: one row per attempt, with its state, timings, worker and error; late_report holds a report that arrived after the run was final; a missed row stands for a gap of missed_fires fires from fire_at to missed_last_at.';
