-- 0330: the jobs with max_runs, which a saturation pass asks about among the thousand jobs it
-- stores (cronbox.store_fires counts their fires against the limit only when one of them has
-- it): a probe of this small index per pass instead of one of the job table per job.
CREATE INDEX job_max_runs_idx ON cronbox.job (job_id) WHERE max_runs IS NOT NULL;
