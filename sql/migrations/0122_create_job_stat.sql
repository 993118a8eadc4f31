-- 0122: a job's run statistics move off its definition row into cronbox.job_stat.
-- Every dispatch and every finish rewrote the job row (~370 bytes, 6 indexes) to move a
-- counter or a last-run column: measured by bench.sqlcost, the job table was half the WAL of
-- a run (the update, 43 % non-HOT at dispatch because a batch rewrites every row of a page at
-- once, so new index entries in job_pkey and job_name_unique too). job_stat is narrow (~90
-- bytes), has no index but its primary key and keeps half of each page free (fillfactor 50),
-- so a batch's updates stay HOT and log a few dozen bytes each. The job row is still locked
-- by dispatch and the finishing functions (it orders them, and its definition decides), but
-- no longer rewritten per run.
-- One row per job, created with the job (trigger cronbox.add_job_stat, in
-- sql/functions/internal/add_job_stat.sql) and deleted with it.
CREATE TABLE cronbox.job_stat (
    job_id              bigint PRIMARY KEY REFERENCES cronbox.job (job_id) ON DELETE CASCADE,
    -- unfinished runs (dispatched, delivered, running): the overlap policy's count
    active_runs         integer NOT NULL DEFAULT 0 CONSTRAINT job_stat_active_runs_nonnegative CHECK (active_runs >= 0),
    consecutive_failures integer NOT NULL DEFAULT 0,
    consecutive_crashes integer NOT NULL DEFAULT 0,
    missed_count        bigint NOT NULL DEFAULT 0,
    last_fire_at        timestamptz,
    last_run_id         bigint,
    last_run_state      text,
    last_success_at     timestamptz
) WITH (fillfactor = 50);

INSERT INTO cronbox.job_stat (job_id, active_runs, consecutive_failures, consecutive_crashes, missed_count,
                              last_fire_at, last_run_id, last_run_state, last_success_at)
SELECT j.job_id, j.active_runs, j.consecutive_failures, j.consecutive_crashes, j.missed_count,
       j.last_fire_at, j.last_run_id, j.last_run_state, j.last_success_at
FROM cronbox.job j;

-- The view reads the columns being moved; `cronbox migrate` recreates it from sql/views.
DROP VIEW IF EXISTS cronbox.schedules;
ALTER TABLE cronbox.job
    DROP COLUMN active_runs,
    DROP COLUMN consecutive_failures,
    DROP COLUMN consecutive_crashes,
    DROP COLUMN missed_count,
    DROP COLUMN last_fire_at,
    DROP COLUMN last_run_id,
    DROP COLUMN last_run_state,
    DROP COLUMN last_success_at;

-- A row belongs to whoever owns its job (as job_future, 0040).
ALTER TABLE cronbox.job_stat ENABLE ROW LEVEL SECURITY;
ALTER TABLE cronbox.job_stat FORCE ROW LEVEL SECURITY;
CREATE POLICY job_stat_read ON cronbox.job_stat FOR SELECT
    USING ((SELECT cronbox.caller_reads_all())
           OR EXISTS (SELECT 1 FROM cronbox.job j WHERE j.job_id = job_stat.job_id
                      AND j.owner = (SELECT cronbox.caller())));
CREATE POLICY job_stat_insert ON cronbox.job_stat FOR INSERT WITH CHECK (true);
CREATE POLICY job_stat_change ON cronbox.job_stat FOR UPDATE
    USING ((SELECT cronbox.caller_writes_all())
           OR EXISTS (SELECT 1 FROM cronbox.job j WHERE j.job_id = job_stat.job_id
                      AND j.owner = (SELECT cronbox.caller())));
CREATE POLICY job_stat_delete ON cronbox.job_stat FOR DELETE
    USING ((SELECT cronbox.caller_writes_all())
           OR EXISTS (SELECT 1 FROM cronbox.job j WHERE j.job_id = job_stat.job_id
                      AND j.owner = (SELECT cronbox.caller())));

COMMENT ON TABLE cronbox.job_stat IS
    'Run statistics of a job (active runs, streaks, last fire, last run, last success, missed fires), one narrow row per job, updated by dispatch and the finishing functions; cronbox.schedules shows them.';
