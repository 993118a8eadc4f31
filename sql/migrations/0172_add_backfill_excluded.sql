-- A backfill honours the job's exclusion calendars (cronbox.excluded_by, the predicate
-- store_fires applies): fires of the range that a calendar excludes are not fired, and counted
-- here, apart from the duplicates (fires that already ran or were pending).
ALTER TABLE cronbox.backfill ADD COLUMN excluded integer NOT NULL DEFAULT 0;
