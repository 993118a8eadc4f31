-- 0190: a run's final write is a HOT update.
--
-- bench.sqlcost: the relay's ack with the worker's answer rewrote the run row non-HOT, every
-- time: state leaves the predicates of run_active_job_idx, run_lease_idx and
-- run_trouble_history_idx, and a column named by any index (key or predicate) changing forbids
-- a heap-only update. So the new version went to another page with a new entry in every index
-- of the run (primary key, job and queue history: ~500 bytes of WAL per run, a quarter of a
-- push run's). After this migration no index of cronbox.run names `state`:
--
--   * run_active_job_idx (unfinished runs per job) is gone. Who needs unfinished runs finds
--     them where they already are: a dispatched run has its outbox row, a delivered or running
--     run its lease (run_lease_idx); cronbox.unfinished_runs unites the two. Per job, the
--     exact count is job_stat.active_runs (kept under the job's lock), and a job's unfinished
--     runs are its newest ones in run_job_history_idx.
--   * run_lease_idx keeps the leases, keyed and filtered on lease_until alone (a run that
--     finishes without ever having had a lease, as a push run answered in the ack, leaves it
--     untouched).
--   * run_trouble_history_idx (the console's "failed runs" and so on) moves to the stored
--     generated column `trouble`: the state when it is failed, lost, cancelled, skipped or
--     missed, NULL otherwise, so a run that succeeds changes no indexed value.
--
-- And the history indexes become ascending: (job_id, run_id DESC) put each new run at the
-- left end of its job's range, where a full page splits in half (nbtree packs pages full only
-- for ascending inserts at the right end of a range); the queries walk them backwards as fast.
--
-- The outbox gets fillfactor 35 (was 50): bench.sqlcost saw 10 % of the claims' lease updates
-- leave their page (a claim leases every row of a page at once, and the leased version is a
-- little longer), each with three new index entries. The outbox is a short table.
--
-- The run partitions get fillfactor 45 (cronbox.ensure_run_partitions_at creates new ones so):
-- a heap-only update needs room for the new version on the same page, and a batch of reports
-- updates every run of a page at once. The price is disk: history pages half full.
-- Adding the generated column rewrites the run partitions once (an ACCESS EXCLUSIVE lock on
-- cronbox.run for the time it takes: plan the upgrade of a large history as a maintenance step).
DROP INDEX IF EXISTS cronbox.run_active_job_idx;
DROP INDEX IF EXISTS cronbox.run_trouble_history_idx;
DROP INDEX IF EXISTS cronbox.run_lease_idx;
DROP INDEX IF EXISTS cronbox.run_job_history_idx;
DROP INDEX IF EXISTS cronbox.run_queue_history_idx;

-- created_at goes: the run id encodes when the row was written (cronbox.new_run_id, in
-- milliseconds; cronbox.run_id_time reads it back), and those 8 bytes were written with every
-- run and logged again by every update of it. Dropped before the rewrite below, which then
-- reclaims its space in existing rows too.
ALTER TABLE cronbox.run DROP COLUMN created_at;

ALTER TABLE cronbox.run ADD COLUMN trouble text GENERATED ALWAYS AS (
    CASE WHEN state IN ('failed', 'lost', 'cancelled', 'skipped', 'missed') THEN state END) STORED;
COMMENT ON COLUMN cronbox.run.trouble IS
    'The state when it is failed, lost, cancelled, skipped or missed, else NULL (generated): indexed by run_trouble_history_idx instead of state, so that a run that succeeds changes no indexed column and its last update is heap-only.';

ALTER TABLE cronbox.outbox SET (fillfactor = 35);

DO $$
DECLARE
    v_part regclass;
BEGIN
    FOR v_part IN SELECT i.inhrelid::regclass FROM pg_inherits i WHERE i.inhparent = 'cronbox.run'::regclass LOOP
        EXECUTE format('ALTER TABLE %s SET (fillfactor = 45)', v_part);
    END LOOP;
END
$$;

-- The reaper: leases that can expire.
CREATE INDEX run_lease_idx ON cronbox.run (lease_until) WHERE lease_until IS NOT NULL;
-- History per job and per queue, walked newest first (backwards).
CREATE INDEX run_job_history_idx ON cronbox.run (job_id, run_id);
CREATE INDEX run_queue_history_idx ON cronbox.run (queue, run_id);
-- The console's runs by failed / lost / cancelled / skipped / missed.
CREATE INDEX run_trouble_history_idx ON cronbox.run (trouble, run_id) WHERE trouble IS NOT NULL;
