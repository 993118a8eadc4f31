-- raw: mark one batch of delivered runs succeeded (as bench_raw.complete_loop)
UPDATE cronbox.run r SET state = 'succeeded', finished_at = now(), lease_until = NULL, started_at = coalesce(r.started_at, now())
WHERE r.run_id = ANY (ARRAY(
    SELECT d.run_id FROM cronbox.run d WHERE d.state = 'delivered' LIMIT :batch FOR UPDATE SKIP LOCKED));
