-- 0470: each job statistics change row (cronbox.job_stat_change) says the bucket of the jobs it
-- names: written by a finishing call or a dispatch in one bucket (cronbox.finish_runs with
-- p_bucket, dispatch's write for one bucket), NULL when the statement that wrote it covered
-- several (plain PostgreSQL, or a walk over every bucket of tables still the coordinator's own).
-- What a fold per bucket will take its rows by, and the column the table will be distributed on
-- (docs/citus.md). A column without a default: no table rewrite.
ALTER TABLE cronbox.job_stat_change ADD COLUMN bucket integer;
