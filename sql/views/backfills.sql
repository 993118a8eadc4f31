-- cronbox.backfills: backfill requests (cronbox.backfill(name, from, to)) and their progress.
-- state: pending until the poller has materialised every fire of the range (fires that
-- already ran or were pending count as duplicates, those the job's calendars exclude as
-- excluded), then done; outcome says how it ended.
DROP VIEW IF EXISTS cronbox.backfills;
CREATE VIEW cronbox.backfills AS
SELECT b.backfill_id, j.name AS job, b.from_at, b.to_at, b.overlap, b.priority,
       CASE WHEN b.done_at IS NULL THEN 'pending' ELSE 'done' END AS state,
       b.fires, b.duplicates, b.excluded, b.done_through, b.requested_by, b.requested_at, b.done_at,
       b.outcome, b.job_id
FROM cronbox.backfill b
JOIN cronbox.job j ON j.bucket = b.bucket AND j.job_id = b.job_id;
COMMENT ON VIEW cronbox.backfills IS 'Backfill requests: job, range (from_at .. to_at, both included), overlap, priority, state (pending, done), fires made, duplicates (already ran or pending, not fired again), excluded (by the job''s exclusion calendars), who asked and when, outcome.';
