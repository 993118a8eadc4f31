-- 0191: the columns of cronbox.job_stat that every run rewrites move to the end of the row.
-- A heap-only update logs the new version of the row minus the bytes it shares
-- with the old one at its start and at its end (PostgreSQL's prefix/suffix compression of
-- UPDATE records on the same page). Dispatch changes active_runs, last_fire_at, last_run_id and
-- last_run_state; a run that finishes active_runs, last_run_state and last_success_at. With
-- active_runs second and last_run_state before last_success_at, each record carried nearly the
-- whole row; in the order below, dispatch logs from last_fire_at on and a finish from
-- last_success_at on (bench.sqlcost: about 50 bytes of WAL per run less).
-- PostgreSQL keeps columns in the order they were added: each is renamed, re-added under its
-- name at the end, copied, and the old one dropped (one rewrite of every row: one row per job).
-- Physical order after: job_id, consecutive_failures, consecutive_crashes, missed_count,
-- last_fire_at, last_run_id, last_success_at, active_runs, last_run_state.
DROP VIEW IF EXISTS cronbox.schedules;  -- reads these columns; `cronbox migrate` recreates it
ALTER TABLE cronbox.job_stat RENAME COLUMN active_runs TO active_runs_moved;
ALTER TABLE cronbox.job_stat RENAME COLUMN last_run_state TO last_run_state_moved;
ALTER TABLE cronbox.job_stat RENAME COLUMN last_success_at TO last_success_at_moved;
ALTER TABLE cronbox.job_stat
    ADD COLUMN last_success_at timestamptz,
    -- unfinished runs (dispatched, delivered, running): the overlap policy's count
    ADD COLUMN active_runs integer NOT NULL DEFAULT 0,
    ADD COLUMN last_run_state text;
UPDATE cronbox.job_stat SET last_success_at = last_success_at_moved, active_runs = active_runs_moved,
                            last_run_state = last_run_state_moved;
ALTER TABLE cronbox.job_stat
    DROP COLUMN active_runs_moved,
    DROP COLUMN last_run_state_moved,
    DROP COLUMN last_success_at_moved;  -- and the old column's CHECK with it
ALTER TABLE cronbox.job_stat ADD CONSTRAINT job_stat_active_runs_nonnegative CHECK (active_runs >= 0);
