-- raw, one row in flight: move one batch of due futures -> one outbox row each (the run in flight)
WITH gone AS (
    DELETE FROM cronbox.job_future f
    WHERE f.future_id = ANY (ARRAY(
        SELECT r.future_id FROM cronbox.job_future r WHERE r.hold IS NULL AND r.due_at <= now()
        ORDER BY r.priority, r.due_at LIMIT :batch FOR UPDATE SKIP LOCKED))
    RETURNING f.job_id, f.fire_at, f.due_at, f.attempt
)
INSERT INTO cronbox_bench.outbox (outbox_id, run_id, job_id, queue, fire_at, due_at, attempt, timeout, dispatched_at)
SELECT g.id, g.id, g.job_id, j.queue, g.fire_at, g.due_at, g.attempt, j.timeout, now()
FROM (SELECT gone.*, cronbox.new_run_id() AS id FROM gone) g JOIN cronbox.job j ON j.job_id = g.job_id;
