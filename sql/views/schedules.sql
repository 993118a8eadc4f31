-- cronbox.schedules: one row per job for psql: what, when, and how it has been going.
-- status: active | paused | quarantined (paused by the poller: it could not process the job)
--         | finished (nothing left to fire, nothing pending or running)
--         | waiting (an `after` job: fired by its upstream jobs).
-- next_fire: the earliest pending future; else the next fire the poller computed (an active
-- job's next_fire beyond its frontier); NULL while it has not computed it yet (schedule() only
-- knows a lower bound: the frontier, never shown as a fire time).
-- last_run_state: the state of the job's newest run. The job's statistics row (cronbox.job_stat)
-- records it when the run is dispatched and when it finishes; in between (delivered, running)
-- it is read from the run itself (one primary-key probe, only for jobs whose newest run is in
-- flight), so the hot worker paths (claim_runs, start_run, the relay's ack) write neither row.
-- Every join is on the bucket and the job (or run) id: on Citus, where the hot tables are
-- distributed by bucket, a join on their distribution column is pushed down to the shards.
DROP VIEW IF EXISTS cronbox.schedules;
CREATE VIEW cronbox.schedules AS
SELECT j.name, j.kind,
       CASE j.kind WHEN 'cron' THEN j.cron
                   WHEN 'every' THEN 'every ' || j.every::text
                        || CASE WHEN j.every_mode = 'fixed_delay' THEN ' after the previous run' ELSE '' END
                   WHEN 'at' THEN 'at ' || j.at::text
                   ELSE 'after ' || array_to_string(j.after, ', ') END AS expression,
       j.cron_normalized,
       j.timezone,
       CASE WHEN j.paused AND j.paused_reason LIKE 'quarantined: %' THEN 'quarantined'
            WHEN j.paused THEN 'paused'
            WHEN j.finished_at IS NOT NULL AND CASE WHEN s.stats_from_runs THEN d.active_runs ELSE s.active_runs END = 0
                 AND f.next_fire IS NULL THEN 'finished'
            WHEN j.kind = 'after' THEN 'waiting'
            ELSE 'active' END AS status,
       j.paused, j.paused_reason, j.paused_at, j.paused_until,
       coalesce(f.next_fire, CASE WHEN NOT j.paused AND jf.next_fire > jf.frontier THEN jf.next_fire END) AS next_fire,
       f.pending,
       CASE WHEN s.stats_from_runs THEN d.last_fire_at ELSE s.last_fire_at END AS last_fire_at,
       CASE WHEN s.stats_from_runs THEN d.last_run_state
            WHEN s.last_run_state = 'dispatched' AND s.last_run_id IS NOT NULL
            THEN coalesce((SELECT o.state FROM cronbox.outbox o
                           WHERE o.bucket = s.bucket AND o.outbox_id = s.last_run_id AND o.kind = 'run'),
                          (SELECT r.state FROM cronbox.run r WHERE r.bucket = s.bucket AND r.run_id = s.last_run_id),
                          s.last_run_state)
            ELSE s.last_run_state END AS last_run_state,
       CASE WHEN s.stats_from_runs THEN d.last_success_at ELSE s.last_success_at END AS last_success_at,
       CASE WHEN s.stats_from_runs THEN d.consecutive_failures ELSE s.consecutive_failures END AS consecutive_failures,
       CASE WHEN s.stats_from_runs THEN d.consecutive_crashes ELSE s.consecutive_crashes END AS consecutive_crashes,
       CASE WHEN s.stats_from_runs THEN d.active_runs ELSE s.active_runs END AS active_runs,
       s.missed_count,
       j.queue, j.priority, j.overlap, j.on_error, j.catchup, j.catchup_window, j.jitter,
       j.starts_at, j.ends_at, j.finished_at,
       j.owner, j.job_id, j.created_at, j.updated_at
FROM cronbox.job j
JOIN cronbox.job_stat s ON s.bucket = j.bucket AND s.job_id = j.job_id  -- run statistics (migration 0122)
JOIN cronbox.job_fire jf ON jf.bucket = j.bucket AND jf.job_id = j.job_id  -- saturation state (migration 0331)
LEFT JOIN LATERAL (
    SELECT min(fu.fire_at) AS next_fire, count(*) AS pending
    FROM cronbox.job_future fu WHERE fu.bucket = j.bucket AND fu.job_id = j.job_id
) f ON true
-- A one-off whose statistics are derived from its runs (job_stat.stats_from_runs; the same values
-- as cronbox.job_stat_derived, written out: tables in a view are read with the view's rights, and
-- Citus pushes down no CTE here): its runs in flight and in history and its waiting retries, by
-- bucket and job, only for such a job (each arm filtered on the flag). The windows give every row
-- the job's last success and the runs its attempts retried (retry_of); partitioned by the bucket,
-- the distribution column, so that Citus pushes them down with the rest.
LEFT JOIN LATERAL (
    SELECT (count(*) FILTER (WHERE w.src = 'flight'))::integer AS active_runs,
           max(w.fire_at) AS last_fire_at,
           (array_agg(w.state ORDER BY w.run_id DESC) FILTER (WHERE w.src <> 'future'))[1] AS last_run_state,
           max(w.ok_at) AS last_success_at,
           (count(*) FILTER (WHERE w.state IN ('failed', 'lost') AND w.finished_at > coalesce(w.ok_at, '-infinity')
                             AND NOT w.run_id = ANY (coalesce(w.retried, '{}'))))::integer AS consecutive_failures,
           (count(*) FILTER (WHERE w.state = 'lost' AND w.finished_at > coalesce(w.ok_at, '-infinity')))::integer
               AS consecutive_crashes
    FROM (SELECT u.*,
                 max(u.finished_at) FILTER (WHERE u.state = 'succeeded') OVER (PARTITION BY u.bucket) AS ok_at,
                 array_agg(u.retry_of) FILTER (WHERE u.retry_of IS NOT NULL) OVER (PARTITION BY u.bucket) AS retried
          FROM (SELECT o.bucket, o.outbox_id AS run_id, o.fire_at, o.state, NULL::timestamptz AS finished_at,
                       o.retry_of, 'flight'::text AS src
                FROM cronbox.outbox o
                WHERE s.stats_from_runs AND o.bucket = j.bucket AND o.job_id = j.job_id AND o.kind = 'run'
                UNION ALL
                SELECT h.bucket, h.run_id, h.fire_at, h.state, h.finished_at, h.retry_of, 'history'
                FROM cronbox.run h
                WHERE s.stats_from_runs AND h.bucket = j.bucket AND h.job_id = j.job_id AND h.dispatched_at IS NOT NULL
                UNION ALL
                SELECT fr.bucket, NULL, NULL, NULL, NULL, fr.retry_of, 'future'
                FROM cronbox.job_future fr
                WHERE s.stats_from_runs AND fr.bucket = j.bucket AND fr.job_id = j.job_id AND fr.retry_of IS NOT NULL) u) w
) d ON true;
COMMENT ON VIEW cronbox.schedules IS 'Schedules: expression, time zone, status (active, paused, quarantined, finished, waiting), paused_until (a pause that ends by itself), next fire, pending futures, last run state and success, failure and crash streaks, active runs, missed fires.';
