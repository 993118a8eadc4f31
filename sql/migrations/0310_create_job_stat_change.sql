-- 0310: job statistics off the hot path. A finishing call (complete_run(s), fail_run(s), the
-- relay's ack with an answer, the reaper, cancel) and a dispatch call write the statistics of
-- the jobs no policy reads while deciding (docs/architecture.md, "Statistics off the hot path")
-- as one row per call here, not one cronbox.job_stat update per job; the poller folds these rows
-- into cronbox.job_stat every second (cronbox.fold_job_stats).
--
-- One row per call; the arrays are parallel, one element per job of the call:
--   active      change of active_runs (+ runs dispatched, - runs ended)
--   last_fire   newest fire dispatched (dispatch only)
--   last_run    newest run of the call for the job and its state (dispatched, failed, or the
--   last_state  state it ended in): the job's last run when no newer one is recorded
--   ok          runs that succeeded (a success resets the streaks, as it does in job_stat)
--   failures    runs failed for good (attempts exhausted) and fires failed at dispatch
--   crashes     runs lost
--   missed      fires recorded missed at dispatch
-- success_at: the time of the call's successes.
CREATE TABLE cronbox.job_stat_change (
    change_id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_ids     bigint[] NOT NULL,
    active      integer[] NOT NULL,
    last_fire   timestamptz[] NOT NULL,
    last_run    bigint[] NOT NULL,
    last_state  text[] NOT NULL,
    ok          integer[] NOT NULL,
    failures    integer[] NOT NULL,
    crashes     integer[] NOT NULL,
    missed      bigint[] NOT NULL,
    success_at  timestamptz NOT NULL
);

-- job_stat.folded_through: the newest change folded into the row (change_id): a change of the
-- job at or below it is already in (a fold of one job's changes under its lock,
-- cronbox.fold_job_stats_of, leaves the rows for the poller's fold, which skips what was
-- folded). Written by the folds only, so it goes before the columns every run rewrites, which
-- stay last (migration 0191: a heap-only update logs the row from its first changed byte):
-- each of those is renamed, re-added at the end, copied, and the old one dropped (one rewrite
-- of every row: one row per job).
DROP VIEW IF EXISTS cronbox.schedules;  -- reads these columns; `cronbox migrate` recreates it
ALTER TABLE cronbox.job_stat ADD COLUMN folded_through bigint NOT NULL DEFAULT 0;
ALTER TABLE cronbox.job_stat RENAME COLUMN last_fire_at TO last_fire_at_moved;
ALTER TABLE cronbox.job_stat RENAME COLUMN last_run_id TO last_run_id_moved;
ALTER TABLE cronbox.job_stat RENAME COLUMN last_success_at TO last_success_at_moved;
ALTER TABLE cronbox.job_stat RENAME COLUMN active_runs TO active_runs_moved;
ALTER TABLE cronbox.job_stat RENAME COLUMN last_run_state TO last_run_state_moved;
ALTER TABLE cronbox.job_stat
    ADD COLUMN last_fire_at timestamptz,
    ADD COLUMN last_run_id bigint,
    ADD COLUMN last_success_at timestamptz,
    -- unfinished runs (dispatched, delivered, running): the overlap policy's count
    ADD COLUMN active_runs integer NOT NULL DEFAULT 0,
    ADD COLUMN last_run_state text;
UPDATE cronbox.job_stat SET last_fire_at = last_fire_at_moved, last_run_id = last_run_id_moved,
                            last_success_at = last_success_at_moved, active_runs = active_runs_moved,
                            last_run_state = last_run_state_moved;
ALTER TABLE cronbox.job_stat
    DROP COLUMN last_fire_at_moved,
    DROP COLUMN last_run_id_moved,
    DROP COLUMN last_success_at_moved,
    DROP COLUMN active_runs_moved,  -- and the old column's CHECK with it
    DROP COLUMN last_run_state_moved;
ALTER TABLE cronbox.job_stat ADD CONSTRAINT job_stat_active_runs_nonnegative CHECK (active_runs >= 0);

-- Only the owner's functions read and write it (no grant to any cronbox role); the rows carry
-- job ids and counts only. Row security like every cronbox table, with policies that cost
-- nothing per statement (the table's privileges are the gate).
ALTER TABLE cronbox.job_stat_change ENABLE ROW LEVEL SECURITY;
ALTER TABLE cronbox.job_stat_change FORCE ROW LEVEL SECURITY;
CREATE POLICY job_stat_change_all ON cronbox.job_stat_change USING (true) WITH CHECK (true);

COMMENT ON TABLE cronbox.job_stat_change IS
    'Job statistics waiting to be folded into cronbox.job_stat (one row per dispatch or finishing call, for the jobs no policy reads while deciding); folded by cronbox.fold_job_stats every second.';
