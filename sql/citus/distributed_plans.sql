-- The hot functions of a database whose hot tables are distributed (Citus layer migration
-- 0356, `cronbox migrate --citus --distribute`), planned with their bucket bound: Citus routes a
-- statement to one shard only when it knows the bucket at planning time, and cannot plan a kept
-- generic plan whose bucket is a parameter (`could not create distributed plan`). Run by the
-- migrate after every run on such a database, because a function file applied again
-- (CREATE OR REPLACE with its own SET list) drops the setting; every overload of each name.
-- On plain PostgreSQL, and on Citus before the hot tables are distributed, the functions keep
-- their own setting (one plan per session).
-- cronbox.distributed = on, with it: the functions whose inserts would read another step's
-- result (Citus sends such a result to every worker node: one node stopped would stop every
-- bucket) take their broadcast-free forms, read once per call with
-- current_setting('cronbox.distributed', true) (docs/citus.md, "A worker node stopped"). Unset
-- anywhere else: plain PostgreSQL keeps its one-statement forms at no cost.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
             WHERE p.pronamespace = 'cronbox'::regnamespace
               AND p.proname = ANY (ARRAY[
                   'ack_outbox_at', 'add_dependency_at', 'add_job_rows', 'apply_job_stat_changes',
                   'backfill_at', 'claim_backfills_at', 'claim_outbox_at', 'claim_runs_at',
                   'claim_saturation_at', 'dispatch_ahead_at', 'dispatch_at', 'dispatch_locked',
                   'dispatch_plain', 'dispatch_plain_fires', 'due_ahead', 'find_dependency_cycle', 'find_jobs_named', 'finish_runs', 'fold_job_stats',
                   'fold_job_stats_of', 'heartbeat_at', 'list_queues', 'lock_job', 'lock_matching_jobs', 'lock_job_id', 'lock_job_named', 'pause_at', 'pause_schedules', 'ready_lanes', 'record_excluded',
                   'record_finished', 'release_futures', 'relock_saturation', 'remove_dependency_at',
                   'rerun_at', 'resume_at', 'resume_schedules', 'resume_paused_at', 'schedule_at', 'schedule_next_fixed_delay',
                   'start_run_at', 'start_runs', 'store_backfill_at', 'store_fires_at', 'tally_runs_at', 'trigger_at', 'unschedule_at',
                   'withdraw_early_runs', 'withdraw_early_runs_of'
               ]) LOOP
        EXECUTE format('ALTER FUNCTION %s SET plan_cache_mode = force_custom_plan SET cronbox.distributed = on', f);
    END LOOP;
END
$$;
