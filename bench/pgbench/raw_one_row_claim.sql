-- raw, one row in flight: lease one batch of outbox rows to a relay (a HOT update: the lease is not indexed)
UPDATE cronbox_bench.outbox o SET lease_until = now() + o.timeout, lease_owner = 'raw', attempts = o.attempts + 1
WHERE o.outbox_id = ANY (ARRAY(
    SELECT c.outbox_id FROM cronbox_bench.outbox c
    WHERE c.queue = 'default' AND c.available_at <= now() AND c.lease_until IS NULL
    ORDER BY c.available_at LIMIT :batch FOR UPDATE SKIP LOCKED));
