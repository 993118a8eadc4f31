-- cronbox.runs: run history for psql, one row per attempt (a retry is a new row): the runs
-- finished (history) and those in flight (their outbox rows), and the fires
-- that wait to become a run (state 'waiting': no run_id yet), with why they wait.
DROP VIEW IF EXISTS cronbox.runs;
CREATE VIEW cronbox.runs AS
SELECT r.run_id, r.job_name AS job, r.queue, r.fire_at, r.state, r.attempt, r.origin,
       r.priority, r.due_at, r.dispatched_at, r.delivered_at, r.started_at, r.finished_at,
       r.finished_at - coalesce(r.started_at, r.delivered_at) AS duration,
       coalesce(r.delivered_at, r.dispatched_at) - r.fire_at AS lag,
       r.lease_until, r.worker, r.cancel_requested, r.error, r.result, r.retry_of,
       -- a report that came after the run was final: kept beside history (0311), by key (with
       -- the bucket: on Citus a join on the distribution column, pushed down to the shards)
       (SELECT l.report FROM cronbox.run_late_report l WHERE l.bucket = r.bucket AND l.run_id = r.run_id) AS late_report,
       r.run_id::text || ':' || r.attempt::text AS idempotency_key,
       r.payload, r.job_id,
       -- state 'missed': one row per gap; fire_at is its first fire
       r.missed_fires, r.missed_last_at,
       -- the state if failed, lost, cancelled, skipped or missed, else NULL: filter on it
       -- (trouble = 'failed') to read run_trouble_history_idx instead of all of history
       r.trouble,
       -- the pool units the run holds while unfinished (taken at dispatch)
       r.needs,
       NULL::text AS waiting_for, NULL::timestamptz AS waiting_since
FROM cronbox.run r
UNION ALL
-- Runs in flight: a run is its outbox row until its final report (docs/architecture.md, "One row
-- in flight"), then its history row above; one statement moves it, so a run is in exactly one
-- of the two at any snapshot. Same columns; lease_until is the run's lease (run_lease_until: a
-- dispatched run has none; the relay's lease on the message is not shown), delivered_at the
-- relay's ack or, for a run a worker started first, its start. The arm is ordered newest first: a member with a
-- WHERE is planned as a subquery of its own, and its order is what lets the outer query's
-- newest-first walk merge it with history's index walks instead of sorting it (the outbox's
-- key is the run id: walked backward, or the few rows in flight sorted, as their number says).
(SELECT o.outbox_id, o.job_name, o.queue, o.fire_at, o.state, o.attempt, o.origin,
       o.priority, o.due_at, o.dispatched_at, coalesce(o.delivered_at, o.started_at), o.started_at,
       NULL::timestamptz, NULL::interval,
       coalesce(o.delivered_at, o.started_at, o.dispatched_at) - o.fire_at,
       o.run_lease_until, o.worker, o.cancel_requested,
       NULL::text, NULL::jsonb, o.retry_of,
       NULL::jsonb, o.outbox_id::text || ':' || o.attempt::text,
       o.payload, o.job_id,
       NULL::bigint, NULL::timestamptz,
       NULL::text,
       o.needs,
       NULL::text, NULL::timestamptz
FROM cronbox.outbox o
WHERE o.kind = 'run'
ORDER BY o.outbox_id DESC)
UNION ALL
-- Fires due but held back: for a pool's units, under a queue's limit, for their dependencies,
-- or behind an earlier run of the job (overlap buffer_one/buffer_all). Not runs yet: run_id is
-- NULL, so a filter on run_id (a run, a page of history, a time range) or on trouble leaves
-- this arm out when the query is planned; it reads the held futures only (job_future_held_idx
-- per job; the pool and queue indexes), never history. Paused jobs' fires are not listed.
SELECT NULL::bigint, j.name, j.queue, f.fire_at, 'waiting'::text, f.attempt, f.origin,
       f.priority, f.due_at, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz,
       NULL::interval, NULL::interval,
       NULL::timestamptz, NULL::text, false, NULL::text, NULL::jsonb, f.retry_of,
       NULL::jsonb, NULL::text,
       coalesce(f.payload, j.payload), f.job_id,
       NULL::bigint, NULL::timestamptz,
       NULL::text,
       j.needs,
       CASE f.hold WHEN 'pool' THEN 'pool ' || f.hold_queue WHEN 'queue_limit' THEN 'queue ' || f.hold_queue
                   WHEN 'dependency' THEN 'dependencies' ELSE 'earlier run' END,
       coalesce(f.held_since, f.due_at)
FROM cronbox.job_future f JOIN cronbox.job j ON j.bucket = f.bucket AND j.job_id = f.job_id
WHERE f.hold IN ('pool', 'queue_limit', 'dependency', 'overlap');
COMMENT ON VIEW cronbox.runs IS 'Run history: one row per attempt, with its state, timings, worker and error; late_report holds a report that arrived after the run was final; a missed row stands for a gap of missed_fires fires from fire_at to missed_last_at; needs: the pool units a run holds. Also the fires held back from dispatch (state waiting, run_id NULL): waiting_for says why (pool <name>, queue <name> at its limit, dependencies, earlier run) and waiting_since since when.';
