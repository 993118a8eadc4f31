-- cronbox.queues: one row per queue, for psql. due = ready fires whose time has come (the
-- poller has not moved them yet), blocked = fires held back (paused job, overlap buffer,
-- dependency, queue limit), in_outbox = messages not yet delivered, running = unfinished
-- runs (dispatched, delivered, running), oldest_lag = how late the oldest fire not yet
-- delivered is (a due future, or a message still in the outbox), from its due time.
-- Queues listed: any with something due, held, in the outbox or running, with a limit, or
-- with runs finished in the last day (cronbox.run_minute).
-- Cost: what is due, held, in the outbox or running, never the whole horizon of futures:
-- ready futures are read per queue and priority (a loose scan of job_future_lane_idx, as
-- dispatch does) up to now, held ones through the partial job_future_held_idx
-- (cronbox.queue_waiting, bucket by bucket on Citus).
DROP VIEW IF EXISTS cronbox.queues;
CREATE VIEW cronbox.queues AS
WITH waiting AS (
    SELECT w.bucket, w.job_id, w.due_at, w.held FROM cronbox.queue_waiting() w
),
fut AS (
    SELECT j.queue,
           count(*) FILTER (WHERE NOT w.held) AS due,
           count(*) FILTER (WHERE w.held) AS blocked,
           min(w.due_at) FILTER (WHERE w.due_at <= now()) AS oldest_due
    FROM waiting w JOIN cronbox.job j ON j.bucket = w.bucket AND j.job_id = w.job_id
    GROUP BY j.queue
),
box AS (
    -- messages not delivered yet: runs in flight still dispatched (a run is its outbox row
    -- until its final report)
    SELECT o.queue, count(*) AS in_outbox, min(coalesce(o.due_at, o.created_at)) AS oldest_message
    FROM cronbox.outbox o
    WHERE o.kind = 'run' AND o.state = 'dispatched'
    GROUP BY o.queue
),
act AS (
    SELECT u.queue, count(*) AS running
    FROM cronbox.unfinished_runs() u
    GROUP BY u.queue
),
-- the limits, read on their own: on Citus a reference table joined with the other steps' results
-- would be read on a node's copy over a connection of its own (as cronbox's owner, who may not
-- log in on the coordinator); on its own, it is read on the coordinator's copy
lim AS MATERIALIZED (
    SELECT q.queue, q.max_running FROM cronbox.queue_limit q
),
names AS (
    SELECT queue FROM fut UNION SELECT queue FROM box UNION SELECT queue FROM act
    UNION SELECT lim.queue FROM lim
    UNION SELECT m.queue FROM cronbox.run_minute m WHERE m.minute >= now() - interval '1 day'
)
SELECT n.queue,
       coalesce(fut.due, 0) AS due,
       coalesce(fut.blocked, 0) AS blocked,
       coalesce(box.in_outbox, 0) AS in_outbox,
       coalesce(act.running, 0) AS running,
       l.max_running,
       greatest(now() - least(fut.oldest_due, box.oldest_message), interval '0') AS oldest_lag
FROM names n
LEFT JOIN fut ON fut.queue = n.queue
LEFT JOIN box ON box.queue = n.queue
LEFT JOIN act ON act.queue = n.queue
LEFT JOIN lim l ON l.queue = n.queue;
COMMENT ON VIEW cronbox.queues IS 'Per queue (any with work due, held, in the outbox or running, a limit, or runs in the last day): due fires not yet moved, blocked (held) fires, messages in the outbox, unfinished runs, the limit, and the oldest lag.';
