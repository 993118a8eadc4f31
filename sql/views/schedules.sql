-- cronbox.schedules: one row per job for psql.
DROP VIEW IF EXISTS cronbox.schedules;
CREATE VIEW cronbox.schedules AS
SELECT j.name, j.kind,
       CASE j.kind WHEN 'cron' THEN j.cron
                   WHEN 'every' THEN 'every ' || j.every::text
                   WHEN 'at' THEN 'at ' || j.at::text
                   ELSE 'after ' || array_to_string(j.after, ', ') END AS expression,
       j.timezone, j.queue, j.priority, j.paused, j.paused_reason,
       (SELECT min(f.fire_at) FROM cronbox.job_future f WHERE f.job_id = j.job_id) AS next_fire,
       j.finished_at IS NOT NULL AND j.active_runs = 0
           AND NOT EXISTS (SELECT 1 FROM cronbox.job_future f WHERE f.job_id = j.job_id) AS finished,
       j.last_fire_at, j.last_run_state, j.last_success_at,
       j.consecutive_failures, j.consecutive_crashes, j.active_runs, j.missed_count,
       j.owner, j.job_id, j.created_at, j.updated_at
FROM cronbox.job j;
COMMENT ON VIEW cronbox.schedules IS 'Schedules: expression, time zone, paused, next fire, last run state and success, failure streaks, active runs.';
