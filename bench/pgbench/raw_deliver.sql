-- raw: claim one batch of outbox rows, delete them, mark their runs delivered (as bench_raw.deliver_loop)
WITH gone AS (
    DELETE FROM cronbox.outbox o
    WHERE o.outbox_id = ANY (ARRAY(
        SELECT c.outbox_id FROM cronbox.outbox c WHERE c.available_at <= now()
        ORDER BY c.available_at LIMIT :batch FOR UPDATE SKIP LOCKED))
    RETURNING o.run_id, o.timeout
)
UPDATE cronbox.run r SET state = 'delivered', delivered_at = now(), lease_until = now() + g.timeout
FROM gone g WHERE r.run_id = g.run_id;
