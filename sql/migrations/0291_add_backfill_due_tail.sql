-- 0291: backfilled fires come due at a bounded rate across all requests. Each pass gives its
-- fires due times one after another from the latest due time any pass gave (or now), and
-- records that tail on its requests: a hundred backfills of a year requested at once no longer
-- put 100,000 fires due "now" ahead of every other job's next fire of the same priority.
ALTER TABLE cronbox.backfill ADD COLUMN due_tail timestamptz;  -- last due time given to its fires
CREATE INDEX backfill_due_tail_idx ON cronbox.backfill (due_tail);
