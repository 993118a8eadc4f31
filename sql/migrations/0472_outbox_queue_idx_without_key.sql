-- 0472: outbox_queue_idx back to (queue, available_at), as before 0469. The key as a third
-- column let a pull claim start after the last key its session took, but made every entry
-- unique: a minute's burst under one available_at no longer shares posting lists
-- (deduplication), so the index is several times larger, and bench.scale at 200,000
-- every-minute schedules with two pull workers measured the claim at 58.8 buffers and 142 µs
-- per run claimed against 18.7 and 38 with the old index and walk (docs/benchmarks.md).
-- Rebuilt only where the original 0469 added the key (0469 is a no-op now): a database that
-- never had it keeps its index as it is, no lock on the outbox while it builds.
DO $$
BEGIN
    IF (SELECT i.indnatts FROM pg_catalog.pg_index i
        WHERE i.indexrelid = 'cronbox.outbox_queue_idx'::regclass) <> 2 THEN
        DROP INDEX cronbox.outbox_queue_idx;
        CREATE INDEX outbox_queue_idx ON cronbox.outbox (queue, available_at);
    END IF;
END
$$;
