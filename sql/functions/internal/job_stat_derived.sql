-- cronbox.job_stat_derived(p_bucket, p_job_id): a derived job's statistics (job_stat.stats_from_runs:
-- a one-off, docs/architecture.md "A one-off's statistics derived from its runs") read from its
-- runs, the values the fold would give: its runs in flight (outbox rows of kind 'run') and in
-- history (run_job_history_idx: a one-off has a few), both read by the job's bucket and id (on
-- Citus, the shards of its bucket). One row. A failure counts once its attempts are exhausted
-- (no run or waiting future retries it: retry_of), as the finishing calls count runs, not
-- attempts; a lost run counts as a crash either way; a success resets both streaks.
-- Called by cronbox.fold_job_stats_of (not inlined: its search_path pinned). cronbox.schedules
-- writes the same read out (a view's tables are read with its rights; Citus pushes no CTE down).
CREATE OR REPLACE FUNCTION cronbox.job_stat_derived(p_bucket integer, p_job_id bigint)
RETURNS TABLE (active_runs integer, last_fire_at timestamptz, last_run_id bigint, last_run_state text,
               last_success_at timestamptz, consecutive_failures integer, consecutive_crashes integer)
LANGUAGE sql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    WITH r AS MATERIALIZED (
        SELECT o.outbox_id AS run_id, o.fire_at, o.state, NULL::timestamptz AS finished_at, o.retry_of,
               true AS in_flight
        FROM cronbox.outbox o
        WHERE o.bucket = p_bucket AND o.job_id = p_job_id AND o.kind = 'run'
        UNION ALL
        SELECT h.run_id, h.fire_at, h.state, h.finished_at, h.retry_of, false
        FROM cronbox.run h
        WHERE h.bucket = p_bucket AND h.job_id = p_job_id AND h.dispatched_at IS NOT NULL
    ),
    -- the attempts retried: by a later run, or by a retry waiting as a future
    retried AS MATERIALIZED (
        SELECT r.retry_of AS run_id FROM r WHERE r.retry_of IS NOT NULL
        UNION
        SELECT f.retry_of FROM cronbox.job_future f
        WHERE f.bucket = p_bucket AND f.job_id = p_job_id AND f.retry_of IS NOT NULL
    ),
    ok AS (SELECT max(r.finished_at) FILTER (WHERE r.state = 'succeeded') AS at FROM r)
    SELECT (count(*) FILTER (WHERE r.in_flight))::integer,
           max(r.fire_at),
           max(r.run_id),
           (array_agg(r.state ORDER BY r.run_id DESC))[1],
           ok.at,
           (count(*) FILTER (WHERE r.state IN ('failed', 'lost') AND r.finished_at > coalesce(ok.at, '-infinity')
                             AND NOT EXISTS (SELECT 1 FROM retried x WHERE x.run_id = r.run_id)))::integer,
           (count(*) FILTER (WHERE r.state = 'lost' AND r.finished_at > coalesce(ok.at, '-infinity')))::integer
    FROM ok LEFT JOIN r ON true
    GROUP BY ok.at
$$;

COMMENT ON FUNCTION cronbox.job_stat_derived(integer, bigint) IS
'Internal: a derived job''s statistics (job_stat.stats_from_runs: a one-off) read from its runs in flight and in history, by its bucket and id: active runs, last fire, newest run and its state, last success, failure and crash streaks, as the fold would give them.';

ALTER FUNCTION cronbox.job_stat_derived(integer, bigint) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.job_stat_derived(integer, bigint) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
