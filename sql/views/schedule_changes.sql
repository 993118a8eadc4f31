-- cronbox.schedule_changes: who changed which schedule, when and why. changed_by is
-- cronbox.caller() (the SET ROLE role if set, else the login role), so it names the caller
-- also under SECURITY DEFINER functions. A job's 'finished' is read from its state
-- (cronbox.job_finishes: nothing left to schedule, no scheduled fire pending) while no row
-- logs it: dispatch does not write it; changed_by 'cronbox', change_id NULL.
-- Filtered by job (job or job_id), one probe of job_change_job_idx.
DROP VIEW IF EXISTS cronbox.schedule_changes;
CREATE VIEW cronbox.schedule_changes AS
SELECT c.changed_at, c.job_name AS job, c.action, c.reason, c.changed_by, c.job_id, c.change_id
FROM cronbox.job_change c
UNION ALL
SELECT d.changed_at, d.name, 'finished', d.reason, 'cronbox'::name, d.job_id, NULL::bigint
FROM cronbox.job_finishes d
LEFT JOIN cronbox.job_change x ON x.job_id = d.job_id AND x.action = 'finished' AND x.changed_at >= d.finished_at
WHERE x.change_id IS NULL;
COMMENT ON VIEW cronbox.schedule_changes IS 'Change log of schedules: created, updated, paused (by operator or after failure), quarantined (by the poller), resumed, triggered, finished, unscheduled; with who (changed_by: the SET ROLE role, else the login role; ''cronbox'' for a finish read from the job''s state), when and why. A job''s finish shows from the commit that decided its last scheduled fire (change_id NULL until schedule() reopens or unschedule() deletes the job, which log it).';
