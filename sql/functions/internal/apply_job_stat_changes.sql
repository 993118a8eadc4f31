-- cronbox.apply_job_stat_changes(p_changes, p_jobs, p_bucket): folds statistics changes
-- (cronbox.job_stat_change) into cronbox.job_stat, for the jobs p_jobs (sorted ascending, no NULLs;
-- NULL: every job the rows name), from the change rows p_changes (NULL: every row there is) of
-- the bucket p_bucket (NULL: any; a job's change rows all carry its bucket, migration 0474, so a
-- fold of one bucket has every change of its jobs). Either the caller holds those jobs' locks
-- (their job_stat rows: every change of them is committed and none is being written), or it is
-- the one poller's fold of the bucket, whose update locks each row and re-checks folded_through
-- on it. Per job, the changes newer than job_stat.folded_through are applied in change_id
-- order, which for one job is the order their writers held its lock: active runs and missed
-- fires added; last fire and last success the latest; last run the newest run id (its state
-- from the newest change naming it); the streaks (consecutive failures and crashes) restart at
-- the last change with a success and add the failures after it, as the finishing calls would
-- have, one after another.
-- Idempotent: folded_through moves to the newest change applied.
-- One statement, run a second time only seldom: the first pass folds every job none of whose
-- changes here is folded yet (its watermark below its first change here: the poller's fold,
-- each round), with no read of the watermarks before the update (a probe of job_stat per job);
-- the update re-checks it on each row it locks. Only when a row was left (a job folded alone
-- or by a fold that skipped the rows naming it since, or a job without a row) are the
-- watermarks read (v_thru) and the statement run again over each job's changes newer than its
-- watermark. With p_bucket every table is read and written in that bucket alone (one task on
-- Citus: docs/citus.md, "What a hot statement must look like on Citus").
CREATE OR REPLACE FUNCTION cronbox.apply_job_stat_changes(p_changes bigint[], p_jobs bigint[],
                                                          p_bucket integer DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET enable_seqscan = off  -- a plan kept from an empty table: docs/architecture.md, SQL conventions
AS $$
DECLARE
    v_n integer;
    v_jobs integer;
    v_total integer := 0;
    v_all bigint[] := p_jobs;  -- the jobs folded (sorted; NULL: every job the rows name)
    v_thru bigint[];           -- second pass: each job's watermark, at its position in v_all
BEGIN
    LOOP
        WITH
        entry AS MATERIALIZED (
            SELECT c.change_id, u.job_id, u.active, u.last_fire, u.last_run, u.last_state, u.ok,
                   u.failures, u.crashes, u.missed, c.success_at
            FROM cronbox.job_stat_change c
            CROSS JOIN LATERAL unnest(c.job_ids, c.active, c.last_fire, c.last_run, c.last_state, c.ok,
                                      c.failures, c.crashes, c.missed)
                AS u(job_id, active, last_fire, last_run, last_state, ok, failures, crashes, missed)
            WHERE (p_bucket IS NULL OR c.bucket = p_bucket)
              AND (p_changes IS NULL OR c.change_id = ANY (p_changes))
              -- v_all is sorted: a binary search (width_bucket), where = ANY compared each entry
              -- with every job (quadratic in the jobs of a fold); NULL: every job of the changes
              AND (v_all IS NULL OR v_all[width_bucket(u.job_id, v_all)] = u.job_id)
        ),
        -- every change of the fold, in job order from the windows' sort (read once, by per_job:
        -- not materialized, so its grouping by job reads that order instead of sorting again)
        fresh AS (
            SELECT e.*, max(e.change_id) FILTER (WHERE e.ok > 0) OVER w AS reset_at,
                   -- the state of the job's newest run (the newest change naming it): one sort of all
                   -- the entries, not one per job
                   first_value(e.last_state) OVER w AS newest_state
            FROM entry e
            -- second pass: the changes newer than the job's watermark
            WHERE v_thru IS NULL OR e.change_id > v_thru[width_bucket(e.job_id, v_all)]
            -- one window for both, one pass over the sorted entries: the frame is the job's every
            -- change, so the maximum is the job's; the first row is the same in any frame
            WINDOW w AS (PARTITION BY e.job_id ORDER BY e.last_run DESC NULLS LAST, e.change_id DESC
                         ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
        ),
        per_job AS (
            SELECT f.job_id,
                   sum(f.active)::integer AS active,
                   max(f.last_fire) AS last_fire,
                   max(f.last_run) AS last_run,
                   min(f.newest_state) AS last_state,  -- the same in every row of the job
                   max(f.success_at) FILTER (WHERE f.ok > 0) AS success_at,
                   bool_or(f.ok > 0) AS reset,
                   coalesce(sum(f.failures) FILTER (WHERE f.reset_at IS NULL OR f.change_id > f.reset_at), 0)::integer AS failures,
                   coalesce(sum(f.crashes) FILTER (WHERE f.reset_at IS NULL OR f.change_id > f.reset_at), 0)::integer AS crashes,
                   sum(f.missed)::bigint AS missed,
                   max(f.change_id) AS through,
                   min(f.change_id) AS since
            FROM fresh f
            GROUP BY f.job_id
        ),
        -- as arrays in job_id order: a job_stat row finds its values at the position width_bucket
        -- gives (docs/architecture.md, SQL conventions: no join, whatever the plan)
        c AS MATERIALIZED (
            -- Arrays of fixed-width values without NULLs (none stands for "no value": -infinity,
            -- run id -1), so that a subscript is an offset: in an array with a NULL, or of text, it
            -- walks the elements before it, and one update of 20,000 jobs walked 10^8 of them.
            -- The states (text) as their positions in the list of run states (run_state_valid's, in
            -- its order; 0: none): an array of integers like the others. A JSON object by job id
            -- (a binary search on its 20,000 text keys per row, and the object built first) cost
            -- about a fifth of the fold.
            -- In job_id order from one sort of the jobs: a sorted sub-select, which the planner never
            -- pulls up, feeds one aggregate node that reads it in order, so every array is in that
            -- order (PostgreSQL 15 sorts the input of each aggregate with its own ORDER BY again:
            -- eleven sorts of the jobs where one does).
            SELECT array_agg(p.job_id) AS ids,
                   array_agg(coalesce(p.active, 0)) AS active,
                   array_agg(coalesce(p.last_fire, '-infinity')) AS last_fire,
                   array_agg(coalesce(p.last_run, -1)) AS last_run,
                   array_agg(coalesce(array_position('{dispatched,delivered,running,succeeded,failed,lost,cancelled,skipped,missed}'::text[],
                                                     p.last_state), 0)) AS last_state,
                   array_agg(coalesce(p.success_at, '-infinity')) AS success_at,
                   array_agg(coalesce(p.reset, false)) AS reset,
                   array_agg(p.failures) AS failures,
                   array_agg(p.crashes) AS crashes,
                   array_agg(coalesce(p.missed, 0)) AS missed,
                   array_agg(p.through) AS through,
                   array_agg(p.since) AS since
            FROM (SELECT * FROM per_job ORDER BY per_job.job_id) p
        ),
        done AS (
            UPDATE cronbox.job_stat s SET
                active_runs = greatest(s.active_runs + c.active[width_bucket(s.job_id, c.ids)], 0),
                last_fire_at = greatest(s.last_fire_at, nullif(c.last_fire[width_bucket(s.job_id, c.ids)], '-infinity')),
                last_run_id = CASE WHEN c.last_run[width_bucket(s.job_id, c.ids)] >= coalesce(s.last_run_id, 0)
                                   THEN c.last_run[width_bucket(s.job_id, c.ids)] ELSE s.last_run_id END,
                last_run_state = CASE WHEN c.last_run[width_bucket(s.job_id, c.ids)] >= coalesce(s.last_run_id, 0)
                                      THEN ('{dispatched,delivered,running,succeeded,failed,lost,cancelled,skipped,missed}'::text[])[nullif(c.last_state[width_bucket(s.job_id, c.ids)], 0)]
                                      ELSE s.last_run_state END,
                last_success_at = greatest(s.last_success_at, nullif(c.success_at[width_bucket(s.job_id, c.ids)], '-infinity')),
                consecutive_failures = CASE WHEN c.reset[width_bucket(s.job_id, c.ids)] THEN 0 ELSE s.consecutive_failures END
                                       + c.failures[width_bucket(s.job_id, c.ids)],
                consecutive_crashes = CASE WHEN c.reset[width_bucket(s.job_id, c.ids)] THEN 0 ELSE s.consecutive_crashes END
                                      + c.crashes[width_bucket(s.job_id, c.ids)],
                missed_count = s.missed_count + c.missed[width_bucket(s.job_id, c.ids)],
                folded_through = greatest(s.folded_through, c.through[width_bucket(s.job_id, c.ids)])
            FROM c
            WHERE (p_bucket IS NULL OR s.bucket = p_bucket) AND s.job_id = ANY (c.ids)
              -- none of the job's changes here folded yet (first pass: else the second; second
              -- pass: past the watermark read, unless a fold of the job alone moved it since)
              AND s.folded_through < c.since[width_bucket(s.job_id, c.ids)]
            RETURNING 1
        )
        SELECT (SELECT count(*) FROM done), coalesce((SELECT cardinality(c.ids) FROM c), 0) INTO v_n, v_jobs;
        v_total := v_total + v_n;
        IF v_n = v_jobs OR v_thru IS NOT NULL THEN
            RETURN v_total;
        END IF;
        -- Some job's row was not updated: a fold of that job alone (cronbox.fold_job_stats_of) or
        -- a fold that could not take its lock has moved its watermark into these changes, or the
        -- job has no row (unscheduled). The same fold again, each job's changes newer than its
        -- watermark only: a job the first pass updated is past all of its changes here.
        v_all := coalesce(p_jobs, ARRAY(
            SELECT DISTINCT u.job_id
            FROM cronbox.job_stat_change c CROSS JOIN LATERAL unnest(c.job_ids) AS u(job_id)
            WHERE (p_bucket IS NULL OR c.bucket = p_bucket)
              AND (p_changes IS NULL OR c.change_id = ANY (p_changes))
            ORDER BY 1));
        -- each job's watermark, once per job (its row by a probe, never a join), at the job's
        -- position in v_all; a job without a row: the largest id (none of its changes is folded)
        v_thru := ARRAY(SELECT coalesce((SELECT s.folded_through FROM cronbox.job_stat s
                                         WHERE (p_bucket IS NULL OR s.bucket = p_bucket)
                                           AND s.job_id = u.job_id LIMIT 1), 9223372036854775807)
                        FROM unnest(v_all) WITH ORDINALITY AS u(job_id, n) ORDER BY u.n);
    END LOOP;
END
$$;

COMMENT ON FUNCTION cronbox.apply_job_stat_changes(bigint[], bigint[], integer) IS
'Internal: folds the statistics changes (cronbox.job_stat_change rows p_changes, NULL: all) of the jobs p_jobs (NULL: all they name) in the bucket p_bucket (NULL: any) into cronbox.job_stat, in the order they were written, skipping those folded already. Call with the jobs locked. Returns the number of jobs updated.';

ALTER FUNCTION cronbox.apply_job_stat_changes(bigint[], bigint[], integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.apply_job_stat_changes(bigint[], bigint[], integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
