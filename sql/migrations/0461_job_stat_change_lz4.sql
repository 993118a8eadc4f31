-- 0461: cronbox.job_stat_change's arrays are compressed with lz4, not pglz. Each dispatch or
-- finishing call writes one row whose arrays hold one element per job of the call (a batch of
-- 1,000 runs: ~50 kB), so each array is compressed and stored out of line; pglz took ~1 µs per
-- job and row (a twentieth of the relay's ack per run in `perf`), lz4 about a sixth of that, at
-- the same size, and the poller's fold reads them back faster too. Rows already stored keep
-- their compression. A server built without lz4 keeps pglz (the ALTER is refused there with
-- feature_not_supported, and nothing else changes).
DO $$
BEGIN
    ALTER TABLE cronbox.job_stat_change
        ALTER COLUMN job_ids SET COMPRESSION lz4,
        ALTER COLUMN active SET COMPRESSION lz4,
        ALTER COLUMN last_fire SET COMPRESSION lz4,
        ALTER COLUMN last_run SET COMPRESSION lz4,
        ALTER COLUMN last_state SET COMPRESSION lz4,
        ALTER COLUMN ok SET COMPRESSION lz4,
        ALTER COLUMN failures SET COMPRESSION lz4,
        ALTER COLUMN crashes SET COMPRESSION lz4,
        ALTER COLUMN missed SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'job_stat_change: this server has no lz4 compression; its arrays keep pglz';
END
$$;
