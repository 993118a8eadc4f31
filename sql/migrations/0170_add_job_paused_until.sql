-- 0170: pause(name, reason, until => ...). job.paused_until is when a paused job
-- resumes by itself (NULL: paused until resume() is called). The poller's reaper resumes the
-- jobs whose time has passed (cronbox.resume_paused) through the same code as resume(); a
-- manual resume or a new pause clears or replaces it. The partial index holds only jobs
-- paused with a time, so the reaper's look-up reads nothing when there are none.
ALTER TABLE cronbox.job ADD COLUMN paused_until timestamptz;
CREATE INDEX job_paused_until_idx ON cronbox.job (paused_until) WHERE paused_until IS NOT NULL;
