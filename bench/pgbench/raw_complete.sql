-- raw: mark one batch of delivered runs succeeded
WITH picked AS (
    SELECT r.run_id FROM cronbox.run r WHERE r.state = 'delivered' LIMIT :batch FOR UPDATE SKIP LOCKED
)
UPDATE cronbox.run r SET state = 'succeeded', finished_at = now(), lease_until = NULL, started_at = coalesce(r.started_at, now())
FROM picked p WHERE r.run_id = p.run_id;
