-- cronbox.calendars: the exclusion calendars (cronbox.create_calendar) the caller may see, with
-- the schedules that use them (schedule(..., exclude => ...)). Row security as for schedules.
DROP VIEW IF EXISTS cronbox.calendars;
CREATE VIEW cronbox.calendars AS
SELECT c.name, c.timezone, c.dates, c.ranges, c.crons,
       ARRAY(SELECT j.name FROM cronbox.job_calendar jc JOIN cronbox.job j ON j.job_id = jc.job_id
             WHERE jc.calendar_id = c.calendar_id ORDER BY j.name) AS used_by,
       c.owner, c.created_at, c.updated_at, c.calendar_id
FROM cronbox.calendar c;
COMMENT ON VIEW cronbox.calendars IS 'Exclusion calendars: excluded local dates, date ranges and cron expressions (matched to the minute) in a time zone, and the schedules that use them.';
