-- cronbox.schedule_changes: who changed which schedule, when and why. changed_by is
-- cronbox.caller() (the SET ROLE role if set, else the login role), so it names the caller
-- also under SECURITY DEFINER functions.
DROP VIEW IF EXISTS cronbox.schedule_changes;
CREATE VIEW cronbox.schedule_changes AS
SELECT c.changed_at, c.job_name AS job, c.action, c.reason, c.changed_by, c.job_id, c.change_id
FROM cronbox.job_change c;
COMMENT ON VIEW cronbox.schedule_changes IS 'Change log of schedules: created, updated, paused (by operator or after failure), quarantined (by the poller), resumed, triggered, finished, unscheduled; with who (changed_by: the SET ROLE role, else the login role), when and why.';
