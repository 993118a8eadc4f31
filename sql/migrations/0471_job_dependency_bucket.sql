-- 0471: a dependency (cronbox.job_dependency) says the bucket of the gated job (NULL: not known,
-- as for a row inserted without it), so that a finished upstream's finishing call releases the
-- gated job's waiting fires in that job's bucket alone (cronbox.finish_runs, step 7, with
-- p_bucket) instead of reading futures over every bucket. Written by add_dependency; the
-- existing rows get their job's bucket here.
ALTER TABLE cronbox.job_dependency ADD COLUMN bucket integer;
UPDATE cronbox.job_dependency d SET bucket = j.bucket FROM cronbox.job j WHERE j.job_id = d.job_id;
