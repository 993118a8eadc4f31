-- 0090: indexes for the web console's list filters (docs/web.md). Runs are listed newest
-- first by run_id (which encodes creation time, so a time range is a run_id range and
-- prunes partitions); each filter gets an index that walks one slice of history in that
-- order, so a page costs the rows it shows, however large history is.
--   by job:   run_job_history_idx (job_id, run_id DESC) already exists (0001)
--   by queue: run_queue_history_idx below
--   by state: the unfinished states are in run_active_job_idx (small); the final "bad"
--             states get a partial index so "failed runs" is not a walk over successes.
--             No index on state itself: an entry per state transition would tax every run.
--   schedules by name: job_name_unique already serves ORDER BY name and prefix search.
CREATE INDEX run_queue_history_idx ON cronbox.run (queue, run_id DESC);
CREATE INDEX run_trouble_history_idx ON cronbox.run (state, run_id DESC)
    WHERE state IN ('failed', 'lost', 'cancelled', 'skipped', 'missed');
-- Change-log entries by name, so a schedule that was unscheduled can still be found.
CREATE INDEX job_change_name_idx ON cronbox.job_change (job_name, change_id DESC);
