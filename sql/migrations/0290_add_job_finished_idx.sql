-- 0290: the jobs with nothing left to schedule (finished_at set by saturation, or by schedule()),
-- which dispatch looks up among the jobs of each batch to log 'finished' when their last
-- scheduled fire has been decided (cronbox.record_finished). A probe of this small index per
-- batch instead of one of the job table per job.
CREATE INDEX job_finished_idx ON cronbox.job (job_id) WHERE finished_at IS NOT NULL;
