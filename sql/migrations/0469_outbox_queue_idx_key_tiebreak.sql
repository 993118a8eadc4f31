-- 0469: made outbox_queue_idx (queue, available_at, outbox_id) for a pull claim that started
-- after the last key its session took. Withdrawn by 0472 (the key column ended the B-tree's
-- deduplication of a burst under one available_at and cost more than the walk saved:
-- docs/benchmarks.md); a database migrated from here on keeps (queue, available_at) and never
-- builds the index twice. A database that applied the original 0469 is put back by 0472.
SELECT 1;
