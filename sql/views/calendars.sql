-- cronbox.calendars: the exclusion calendars (cronbox.create_calendar) the caller may see, with
-- the schedules that use them (schedule(..., exclude => ...)). Row security as for schedules.
-- The uses are read first on their own (a materialized CTE): on Citus the jobs are distributed
-- and the uses the coordinator's own, which Citus joins only through such an intermediate result.
DROP VIEW IF EXISTS cronbox.calendars;
CREATE VIEW cronbox.calendars AS
WITH uses AS MATERIALIZED (SELECT jc.job_id, jc.calendar_id FROM cronbox.job_calendar jc),
used AS (SELECT u.calendar_id, j.name FROM uses u JOIN cronbox.job j ON j.job_id = u.job_id)
SELECT c.name, c.timezone, c.dates, c.ranges, c.crons,
       ARRAY(SELECT u.name FROM used u WHERE u.calendar_id = c.calendar_id ORDER BY u.name) AS used_by,
       c.owner, c.created_at, c.updated_at, c.calendar_id
FROM cronbox.calendar c;
COMMENT ON VIEW cronbox.calendars IS 'Exclusion calendars: excluded local dates, date ranges and cron expressions (matched to the minute) in a time zone, and the schedules that use them.';
