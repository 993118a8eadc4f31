-- 0331: a job's saturation state moves off its definition row into cronbox.job_fire.
-- Every saturation pass rewrote the job row of each job it stored (~770 bytes, a new version
-- in every one of its indexes: next_fire is indexed, so the update is never HOT) to move its
-- frontier, next fire and count of fires made: half of the server's time per schedule
-- (bench.saturation; a micro-benchmark of 1,000 updates: 24 ms of backend CPU on the wide row,
-- 10 ms on a narrow one). job_fire is narrow (~60 bytes), has no index but its primary key and
-- the claim's partial index, and keeps room on each page for the next version (fillfactor 50).
-- `paused` is the job's own flag, copied here by every writer of cronbox.job.paused, because
-- the claim's index leaves paused jobs out (their next fire is kept for the resume).
-- One row per job, created with the job (trigger cronbox.add_job_fire, in
-- sql/functions/internal/add_job_fire.sql) and deleted with it.
CREATE TABLE cronbox.job_fire (
    job_id      bigint PRIMARY KEY REFERENCES cronbox.job (job_id) ON DELETE CASCADE,
    paused      boolean NOT NULL DEFAULT false,
    -- scheduled fires made, counted against max_runs
    fires_made  bigint NOT NULL DEFAULT 0,
    -- Saturation frontier: every fire <= frontier is materialised (or recorded as missed);
    -- next_fire is a lower bound of the first fire > frontier (exact once the poller computed
    -- it). NULL next_fire = nothing to materialise (finished, or fired by dependencies).
    frontier    timestamptz,
    next_fire   timestamptz
) WITH (fillfactor = 50);

INSERT INTO cronbox.job_fire (job_id, paused, fires_made, frontier, next_fire)
SELECT j.job_id, j.paused, j.fires_made, j.frontier, j.next_fire FROM cronbox.job j;

-- The views read the columns being moved; `cronbox migrate` recreates them from sql/views.
DROP VIEW IF EXISTS cronbox.schedules;
DROP VIEW IF EXISTS cronbox.schedule_definitions;
DROP INDEX cronbox.job_saturate_idx;
ALTER TABLE cronbox.job
    DROP COLUMN frontier,
    DROP COLUMN next_fire,
    DROP COLUMN fires_made;

-- Serves the poller's saturation claim: jobs whose next fire is inside the horizon.
-- Paused and finished jobs have next_fire NULL or are left out, so an idle tick reads nothing.
CREATE INDEX job_saturate_idx ON cronbox.job_fire (next_fire)
    WHERE next_fire IS NOT NULL AND NOT paused;

-- A stored fire closes a job's open stretch of excluded fires (cronbox.store_fires): the jobs
-- with one are few, found by this small index instead of a probe of each job row per pass.
CREATE INDEX job_excluded_idx ON cronbox.job (job_id) WHERE excluded_run_id IS NOT NULL;

-- A row belongs to whoever owns its job (as job_stat, 0122).
ALTER TABLE cronbox.job_fire ENABLE ROW LEVEL SECURITY;
ALTER TABLE cronbox.job_fire FORCE ROW LEVEL SECURITY;
CREATE POLICY job_fire_read ON cronbox.job_fire FOR SELECT
    USING ((SELECT cronbox.caller_reads_all())
           OR EXISTS (SELECT 1 FROM cronbox.job j WHERE j.job_id = job_fire.job_id
                      AND j.owner = (SELECT cronbox.caller())));
CREATE POLICY job_fire_insert ON cronbox.job_fire FOR INSERT WITH CHECK (true);
CREATE POLICY job_fire_change ON cronbox.job_fire FOR UPDATE
    USING ((SELECT cronbox.caller_writes_all())
           OR EXISTS (SELECT 1 FROM cronbox.job j WHERE j.job_id = job_fire.job_id
                      AND j.owner = (SELECT cronbox.caller())));
CREATE POLICY job_fire_delete ON cronbox.job_fire FOR DELETE
    USING ((SELECT cronbox.caller_writes_all())
           OR EXISTS (SELECT 1 FROM cronbox.job j WHERE j.job_id = job_fire.job_id
                      AND j.owner = (SELECT cronbox.caller())));

COMMENT ON TABLE cronbox.job_fire IS
    'Saturation state of a job (frontier, next fire, fires made, and a copy of its paused flag for the claim''s index), one narrow row per job, rewritten by every saturation pass; cronbox.schedules and cronbox.schedule_definitions show it.';
