-- raw: claim one batch of outbox rows, delete them, mark their runs delivered
WITH picked AS (
    SELECT o.outbox_id FROM cronbox.outbox o
    WHERE o.available_at <= now() ORDER BY o.available_at LIMIT :batch FOR UPDATE SKIP LOCKED
),
gone AS (
    DELETE FROM cronbox.outbox o USING picked p WHERE o.outbox_id = p.outbox_id RETURNING o.run_id, o.timeout
)
UPDATE cronbox.run r SET state = 'delivered', delivered_at = now(), lease_until = now() + g.timeout
FROM gone g WHERE r.run_id = g.run_id;
