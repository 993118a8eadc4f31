-- 0390: every hot row carries the bucket of its job (docs/citus.md, "The design"). On Citus
-- (`cronbox migrate --citus`) the bucket is the distribution value of the hot tables: a job's
-- bucket comes from its name (cronbox.job_bucket at schedule(); cronbox.bucket_of), and every
-- row made for the job copies it from the job, the future or the run in flight it comes from,
-- so a run's whole life stays in one bucket. On plain PostgreSQL there is one bucket, 0: the
-- column is always 0 (the default, stored in the catalog: adding it rewrites no table) and the
-- statements that copy it cost a column each. One text of every function for both.
ALTER TABLE cronbox.job ADD COLUMN bucket integer NOT NULL DEFAULT 0;
ALTER TABLE cronbox.job_fire ADD COLUMN bucket integer NOT NULL DEFAULT 0;
ALTER TABLE cronbox.job_stat ADD COLUMN bucket integer NOT NULL DEFAULT 0;
ALTER TABLE cronbox.job_future ADD COLUMN bucket integer NOT NULL DEFAULT 0;
ALTER TABLE cronbox.outbox ADD COLUMN bucket integer NOT NULL DEFAULT 0;
ALTER TABLE cronbox.run ADD COLUMN bucket integer NOT NULL DEFAULT 0;

-- A database already migrated with --citus (it has the buckets): every job in the bucket of its
-- name's group, and its rows with it. Plain PostgreSQL: nothing to do (every row in bucket 0).
DO $$
BEGIN
    IF to_regclass('cronbox.bucket') IS NOT NULL THEN
        UPDATE cronbox.job j SET bucket = cronbox.bucket_of(j.name);
        UPDATE cronbox.job_fire x SET bucket = j.bucket FROM cronbox.job j WHERE j.job_id = x.job_id AND x.bucket <> j.bucket;
        UPDATE cronbox.job_stat x SET bucket = j.bucket FROM cronbox.job j WHERE j.job_id = x.job_id AND x.bucket <> j.bucket;
        UPDATE cronbox.job_future x SET bucket = j.bucket FROM cronbox.job j WHERE j.job_id = x.job_id AND x.bucket <> j.bucket;
        UPDATE cronbox.outbox x SET bucket = j.bucket FROM cronbox.job j WHERE j.job_id = x.job_id AND x.bucket <> j.bucket;
        UPDATE cronbox.run x SET bucket = j.bucket FROM cronbox.job j WHERE j.job_id = x.job_id AND x.bucket <> j.bucket;
    END IF;
END
$$;
