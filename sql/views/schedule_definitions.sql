-- cronbox.schedule_definitions: each job's full definition as given to cronbox.schedule()
-- (the web console's schedule page; cronbox.schedules shows state, this shows the settings).
DROP VIEW IF EXISTS cronbox.schedule_definitions;
CREATE VIEW cronbox.schedule_definitions AS
SELECT j.name, j.kind, j.cron, j.cron_normalized, j.every, j.every_mode, j.at, j.after, j.timezone,
       j.payload, j.queue, j.priority, j.overlap, j.on_error, j.max_attempts, j.retry_delay,
       j.retry_max_delay, j.timeout, j.catchup, j.catchup_window, j.jitter, j.starts_at, j.ends_at,
       j.definition_version, j.owner, j.job_id,
       -- max_runs: the limit and the scheduled fires made so far; exclude: its calendars
       j.max_runs, j.fires_made,
       ARRAY(SELECT c.name FROM cronbox.job_calendar jc JOIN cronbox.calendar c ON c.calendar_id = jc.calendar_id
             WHERE jc.job_id = j.job_id ORDER BY c.name) AS exclude
FROM cronbox.job j;
COMMENT ON VIEW cronbox.schedule_definitions IS 'Each schedule''s definition as passed to cronbox.schedule(): expression, payload, queue, retry, timeout, catch-up and window settings, max_runs (and fires_made), the exclusion calendars.';
