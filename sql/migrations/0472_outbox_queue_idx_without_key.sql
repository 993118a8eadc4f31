-- 0472: outbox_queue_idx back to (queue, available_at), as before 0469. The key as a third
-- column let a pull claim start after the last key its session took, but made every entry
-- unique: a minute's burst under one available_at no longer shares posting lists
-- (deduplication), so the index is several times larger, and bench.scale at 200,000
-- every-minute schedules with two pull workers measured the claim at 58.8 buffers and 142 µs
-- per run claimed against 18.7 and 38 with the old index and walk (docs/benchmarks.md).
DROP INDEX cronbox.outbox_queue_idx;
CREATE INDEX outbox_queue_idx ON cronbox.outbox (queue, available_at);
