-- 0010: what cronbox.schedule() and friends need beyond the core tables.
--   time_zone   the IANA names PostgreSQL knew when migrated: validating a time zone against
--               pg_timezone_names costs ~50 ms (it opens every zone file); an index lookup
--               here costs microseconds. schedule() falls back to pg_timezone_names for a name
--               missing here (a zone added by a later tzdata), so a stale list never rejects.
--   job.paused_at  since when a job is paused (shown in cronbox.schedules).

CREATE TABLE cronbox.time_zone (
    name text PRIMARY KEY
);
INSERT INTO cronbox.time_zone (name)
SELECT DISTINCT name FROM pg_catalog.pg_timezone_names;

ALTER TABLE cronbox.job ADD COLUMN paused_at timestamptz;
