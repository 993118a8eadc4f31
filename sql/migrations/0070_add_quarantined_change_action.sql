-- 0070: the change log can say that the poller quarantined a schedule (paused it because it
-- could not process it: fires that cannot be computed, a row that makes saturation or
-- dispatch fail). cronbox.quarantine_job writes it; cronbox.resume undoes it like any pause.
ALTER TABLE cronbox.job_change DROP CONSTRAINT job_change_action_valid;
ALTER TABLE cronbox.job_change ADD CONSTRAINT job_change_action_valid CHECK (action IN (
    'created', 'updated', 'paused', 'resumed', 'unscheduled', 'triggered',
    'paused_after_failure', 'finished', 'quarantined'));
