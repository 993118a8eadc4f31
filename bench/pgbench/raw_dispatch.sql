-- raw: move one batch of due futures -> run + outbox (same statement as bench_raw.dispatch_loop)
WITH gone AS (
    DELETE FROM cronbox.job_future f
    WHERE f.future_id = ANY (ARRAY(
        SELECT r.future_id FROM cronbox.job_future r WHERE r.hold IS NULL AND r.due_at <= now()
        ORDER BY r.priority, r.due_at LIMIT :batch FOR UPDATE SKIP LOCKED))
    RETURNING f.job_id, f.fire_at, f.due_at, f.attempt
),
fire AS (
    SELECT cronbox.new_run_id() AS run_id, g.job_id, g.fire_at, g.due_at, g.attempt, j.name, j.queue, j.payload, j.timeout
    FROM gone g JOIN cronbox.job j ON j.job_id = g.job_id
),
new_run AS (
    INSERT INTO cronbox.run (run_id, job_id, job_name, queue, fire_at, due_at, state, attempt, dispatched_at)
    SELECT run_id, job_id, name, queue, fire_at, due_at, 'dispatched', attempt, now() FROM fire
)
INSERT INTO cronbox.outbox (run_id, queue, message, timeout)
SELECT run_id, queue, jsonb_build_object('run_id', run_id, 'job', name, 'queue', queue, 'payload', payload, 'fire_at', fire_at, 'attempt', attempt), timeout
FROM fire;
