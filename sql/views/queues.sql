-- cronbox.queues: one row per queue, for psql. due = ready fires whose time has come (the
-- poller has not moved them yet), blocked = fires held back (paused job, overlap buffer,
-- dependency, queue limit), in_outbox = messages not yet delivered, running = unfinished
-- runs (dispatched, delivered, running), oldest_lag = how late the oldest fire not yet
-- delivered is (a due future, or a message still in the outbox), from its due time.
DROP VIEW IF EXISTS cronbox.queues;
CREATE VIEW cronbox.queues AS
WITH fut AS (
    SELECT j.queue,
           count(*) FILTER (WHERE f.hold IS NULL AND f.due_at <= now()) AS due,
           count(*) FILTER (WHERE f.hold IS NOT NULL) AS blocked,
           min(f.due_at) FILTER (WHERE f.due_at <= now()) AS oldest_due
    FROM cronbox.job_future f JOIN cronbox.job j ON j.job_id = f.job_id
    GROUP BY j.queue
),
box AS (
    SELECT o.queue, count(*) AS in_outbox, min(coalesce(r.due_at, o.created_at)) AS oldest_message
    FROM cronbox.outbox o LEFT JOIN cronbox.run r ON r.run_id = o.run_id
    WHERE o.kind = 'run'
    GROUP BY o.queue
),
act AS (
    SELECT r.queue, count(*) AS running
    FROM cronbox.run r WHERE r.state IN ('dispatched', 'delivered', 'running')
    GROUP BY r.queue
),
names AS (
    SELECT queue FROM fut UNION SELECT queue FROM box UNION SELECT queue FROM act
    UNION SELECT q.queue FROM cronbox.queue_limit q
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
LEFT JOIN cronbox.queue_limit l ON l.queue = n.queue;
COMMENT ON VIEW cronbox.queues IS 'Per queue: due fires not yet moved, blocked (held) fires, messages in the outbox, unfinished runs, the limit, and the oldest lag.';
