-- 0250: re-running a finished run (cronbox.rerun): a future, then a run, of origin 'rerun'
-- (the same fire time and payload as the run it repeats), and the change log's 'rerun' action.
ALTER TABLE cronbox.job_future DROP CONSTRAINT job_future_origin_valid;
ALTER TABLE cronbox.job_future ADD CONSTRAINT job_future_origin_valid
    CHECK (origin IN ('schedule', 'manual', 'retry', 'dependency', 'backfill', 'rerun'));

ALTER TABLE cronbox.job_change DROP CONSTRAINT job_change_action_valid;
ALTER TABLE cronbox.job_change ADD CONSTRAINT job_change_action_valid CHECK (action IN (
    'created', 'updated', 'paused', 'resumed', 'unscheduled', 'triggered',
    'paused_after_failure', 'finished', 'quarantined', 'backfill', 'rerun'));
