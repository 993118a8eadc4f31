-- raw, one row in flight: the final report of one batch of leased runs: the outbox row goes,
-- the history row is written once, in its final state
WITH gone AS (
    DELETE FROM cronbox_bench.outbox o
    WHERE o.outbox_id = ANY (ARRAY(
        SELECT c.outbox_id FROM cronbox_bench.outbox c WHERE c.lease_until IS NOT NULL
        LIMIT :batch FOR UPDATE SKIP LOCKED))
    RETURNING o.*
)
INSERT INTO cronbox.run (run_id, job_id, job_name, queue, fire_at, due_at, state, attempt, dispatched_at,
                         delivered_at, started_at, finished_at, worker)
SELECT g.outbox_id, g.job_id, j.name, g.queue, g.fire_at, g.due_at, 'succeeded', g.attempt, g.dispatched_at,
       now(), now(), now(), g.lease_owner
FROM gone g JOIN cronbox.job j ON j.job_id = g.job_id;
