-- 0050: room on every page of cronbox.job for its bookkeeping updates. A job row (~370 bytes)
-- is rewritten at each dispatch (active_runs, last_fire_at, last_run_*) and each finish
-- (last_success_at, streaks). None of those columns is indexed, so the update can be HOT (no
-- new entry in job_pkey, job_name_unique, ...) when the page has room for the new version; at
-- the default fillfactor 100 it never has. Measured with 1,000-run batches: WAL written by an
-- ack 1,238 -> 798 bytes per run at fillfactor 50, 933 at 70 (docs/benchmarks.md). Applies to
-- pages filled from now on (VACUUM FULL or pg_repack rewrites existing ones).
ALTER TABLE cronbox.job SET (fillfactor = 60);
