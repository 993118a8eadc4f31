-- 0463: a backfill request carries the bucket of its job (docs/citus.md, "The design"), as every
-- hot row does since 0390: the poller's backfill passes claim and store bucket by bucket
-- (cronbox.claim_backfills, cronbox.store_backfill: p_bucket), and on Citus the requests are
-- distributed with their jobs. The pacing of backfilled fires (2,000 a second from the last due
-- time given) is then per bucket: the last due time is looked up in the request's bucket,
-- backfill_due_tail_idx leading with it. On plain PostgreSQL every row is in bucket 0 (the
-- default, stored in the catalog: adding it rewrites no table), so nothing changes there.
ALTER TABLE cronbox.backfill ADD COLUMN bucket integer NOT NULL DEFAULT 0;

-- A database already migrated with --citus: every request in its job's bucket.
UPDATE cronbox.backfill b SET bucket = j.bucket FROM cronbox.job j WHERE j.job_id = b.job_id AND b.bucket <> j.bucket;

DROP INDEX cronbox.backfill_due_tail_idx;
CREATE INDEX backfill_due_tail_idx ON cronbox.backfill (bucket, due_tail);
