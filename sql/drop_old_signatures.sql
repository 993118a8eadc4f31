-- sql/drop_old_signatures.sql: the one place where superseded function signatures are dropped.
-- Applied by `cronbox migrate` before the function files, in the same transaction. A changed
-- parameter list or result type makes a new function under CREATE OR REPLACE, so the old one
-- must go or calls become ambiguous. IF EXISTS: a fresh database has none of them.
DROP FUNCTION IF EXISTS cronbox.ack_outbox(text,bigint[],jsonb,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.ack_outbox(text,bigint[],jsonb);
DROP FUNCTION IF EXISTS cronbox.ack_outbox_at(text,bigint[],jsonb,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.add_dependency(text,text,interval,interval,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.bucket_walks(regclass);
DROP FUNCTION IF EXISTS cronbox.cancel(bigint,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.claim_outbox(text, integer, interval, text[], text[], timestamptz);
DROP FUNCTION IF EXISTS cronbox.claim_outbox(text,integer,interval,text[],text[],timestamp with time zone,interval);
DROP FUNCTION IF EXISTS cronbox.claim_outbox(text,integer,interval,text[],text[],interval);
DROP FUNCTION IF EXISTS cronbox.claim_outbox_at(text,integer,interval,text[],text[],interval,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.claim_runs(text,text,integer,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.claim_runs(text,text,integer);
DROP FUNCTION IF EXISTS cronbox.claim_runs_at(text,text,integer,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.claim_saturation(integer,interval,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.complete_run(bigint,jsonb,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.complete_runs(bigint[],jsonb[],timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.dispatch(integer,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.dispatch_ahead(integer,interval,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.drop_run_partitions(interval,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.ensure_run_partitions(integer,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.fail_run(bigint,text,boolean,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.fail_runs(bigint[],text[],boolean,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.heartbeat(bigint,text,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.job_stat_folded(bigint,text[]);
DROP FUNCTION IF EXISTS cronbox.lock_job_id(bigint);
-- job_stat_folded(bigint,text,text,text,text[]) returned a boolean before it became a table
-- function (inlined in FROM): the scalar one goes, the table function stays.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_proc p
               WHERE p.oid = pg_catalog.to_regprocedure('cronbox.job_stat_folded(bigint,text,text,text,text[])')
                 AND NOT p.proretset) THEN
        DROP FUNCTION cronbox.job_stat_folded(bigint,text,text,text,text[]);
    END IF;
END
$$;
DROP FUNCTION IF EXISTS cronbox.heartbeat_process(bigint,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.metrics_gauges(timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.nack_outbox(text, bigint[], text[], boolean[], double precision[], integer, interval, interval, timestamptz);
DROP FUNCTION IF EXISTS cronbox.nack_outbox(text,bigint[],text[],boolean[],double precision[],integer,interval,interval,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.nack_outbox(text,bigint[],text[],boolean[],double precision[],integer,interval,interval);
DROP FUNCTION IF EXISTS cronbox.nack_outbox_at(text,bigint[],text[],boolean[],double precision[],integer,interval,interval,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.nack_outbox_unsent(text,bigint[],interval);
-- pause(text,text,boolean,timestamptz) was once (name, reason, after_failure, p_now); now
-- the same types are (name, reason, after_failure, until): drop only the old one.
DO $$
BEGIN
    IF (SELECT p.proargnames[4] FROM pg_catalog.pg_proc p
        WHERE p.oid = pg_catalog.to_regprocedure('cronbox.pause(text,text,boolean,timestamp with time zone)')) = 'p_now' THEN
        DROP FUNCTION cronbox.pause(text,text,boolean,timestamp with time zone);
    END IF;
END
$$;
DROP FUNCTION IF EXISTS cronbox.reap_lost(integer,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.reconcile_queue_limits(text[],timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.redrive(bigint,text,boolean,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.register_process(text,text,text,integer,text,interval,jsonb,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.release_holds(integer,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.release_outbox(text, bigint[], timestamptz);
DROP FUNCTION IF EXISTS cronbox.release_outbox(text,bigint[],timestamp with time zone,interval);
DROP FUNCTION IF EXISTS cronbox.release_outbox(text,bigint[],interval);
DROP FUNCTION IF EXISTS cronbox.release_outbox_at(text,bigint[],interval,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.remove_dependency(text,text,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.resume(text,text,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.run_message(bigint,text,text,jsonb,timestamp with time zone,integer);
DROP FUNCTION IF EXISTS cronbox.schedule(text,text,interval,timestamp with time zone,jsonb,text,text,integer,text,text,integer,interval,interval,interval,text,interval,interval,timestamp with time zone,timestamp with time zone,text[],text,text,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.set_queue_limit(text,integer,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.start_run(bigint,text,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.store_fires(bigint[],timestamp with time zone[],boolean[],bigint[],timestamp with time zone[],timestamp with time zone[],boolean[],text[],timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.trigger(text,jsonb,text,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.unschedule(text,text,timestamp with time zone);
-- claim_saturation gained the column catchup_from (0070s, bounded catch-up): same arguments,
-- new result type, so the old pair is dropped once (only while it lacks the column).
DO $drop$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_proc p
               WHERE p.oid = pg_catalog.to_regprocedure('cronbox.claim_saturation_at(integer,interval,timestamp with time zone)')
                 AND NOT 'catchup_from' = ANY (p.proargnames)) THEN
        DROP FUNCTION cronbox.claim_saturation_at(integer, interval, timestamp with time zone);
        DROP FUNCTION IF EXISTS cronbox.claim_saturation(integer, interval);
    END IF;
END
$drop$;
-- claim_outbox returns its message as json (the text the relay sends) with the message's
-- idempotency key and fire time beside it: same arguments, new result type, so the old pair
-- is dropped once (only while it lacks the column).
DO $drop$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_proc p
               WHERE p.oid = pg_catalog.to_regprocedure('cronbox.claim_outbox_at(text,integer,interval,text[],text[],interval,integer,timestamp with time zone)')
                 AND NOT 'idempotency_key' = ANY (p.proargnames)) THEN
        DROP FUNCTION cronbox.claim_outbox_at(text,integer,interval,text[],text[],interval,integer,timestamp with time zone);
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_proc p
               WHERE p.oid = pg_catalog.to_regprocedure('cronbox.claim_outbox(text,integer,interval,text[],text[],interval,integer)')
                 AND NOT 'idempotency_key' = ANY (p.proargnames)) THEN
        DROP FUNCTION cronbox.claim_outbox(text,integer,interval,text[],text[],interval,integer);
    END IF;
END
$drop$;
-- claim_outbox gained p_parts (a run's message as its parts, for the relay to write).
DROP FUNCTION IF EXISTS cronbox.claim_outbox(text,integer,interval,text[],text[],interval,integer);
DROP FUNCTION IF EXISTS cronbox.claim_outbox_at(text,integer,interval,text[],text[],interval,integer,timestamp with time zone);
-- store_fires gained the gap arrays, dispatch p_jobs and p_grace (bounded catch-up, isolation).
DROP FUNCTION IF EXISTS cronbox.store_fires_at(bigint[],timestamp with time zone[],boolean[],bigint[],timestamp with time zone[],timestamp with time zone[],boolean[],text[],timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.store_fires(bigint[],timestamp with time zone[],boolean[],bigint[],timestamp with time zone[],timestamp with time zone[],boolean[],text[]);
DROP FUNCTION IF EXISTS cronbox.dispatch_at(integer,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.dispatch_at(integer,timestamp with time zone,bigint[],interval);
DROP FUNCTION IF EXISTS cronbox.dispatch(integer);
-- add_dependency/remove_dependency take `name` like every other function (`job` stays as a
-- trailing alias for a release): one function each, so the old two-text-argument ones go.
DROP FUNCTION IF EXISTS cronbox.add_dependency(text,text,interval,interval);
DROP FUNCTION IF EXISTS cronbox.add_dependency_at(text,text,interval,interval,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.remove_dependency(text,text);
DROP FUNCTION IF EXISTS cronbox.remove_dependency_at(text,text,timestamp with time zone);
-- validate_schedule_args takes the call's arguments as one jsonb (the options are declared by
-- cronbox.schedule_options()), so a new schedule option no longer changes its signature.
DROP FUNCTION IF EXISTS cronbox.validate_schedule_args(text,text,interval,timestamp with time zone,jsonb,text,text,integer,text,text,integer,interval,interval,interval,text,interval,interval,timestamp with time zone,timestamp with time zone,text[],text);
DROP FUNCTION IF EXISTS cronbox.pause(text,text,boolean);
DROP FUNCTION IF EXISTS cronbox.pause_at(text,text,boolean,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.resume_at(text,text,timestamp with time zone);
-- schedule() gained max_runs and exclude.
DROP FUNCTION IF EXISTS cronbox.schedule(text, text, interval, timestamp with time zone, jsonb, text, text, integer, text, text, integer, interval, interval, interval, text, interval, interval, timestamp with time zone, timestamp with time zone, text[], text, text);
DROP FUNCTION IF EXISTS cronbox.schedule_at(text, text, interval, timestamp with time zone, jsonb, text, text, integer, text, text, integer, interval, interval, interval, text, interval, interval, timestamp with time zone, timestamp with time zone, text[], text, text, timestamp with time zone);

-- schedule() gained needs, on_unavailable, unavailable_timeout and notify (resource pools, stakeholders).
DROP FUNCTION IF EXISTS cronbox.schedule(text, text, interval, timestamp with time zone, jsonb, text, text, integer, text, text, integer, interval, interval, interval, text, interval, interval, timestamp with time zone, timestamp with time zone, text[], text, text, integer, text);
DROP FUNCTION IF EXISTS cronbox.schedule_at(text, text, interval, timestamp with time zone, jsonb, text, text, integer, text, text, integer, interval, interval, interval, text, interval, interval, timestamp with time zone, timestamp with time zone, text[], text, text, integer, text, timestamp with time zone);

-- release_pool_units gained p_in_use (the recount is made by reconcile_pools).
DROP FUNCTION IF EXISTS cronbox.release_pool_units(text[], bigint[], timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.sync_schedule_names();

-- dispatch and early dispatch take p_bucket, their shared write and the lanes a bucket set
-- (they walk bucket by bucket: docs/citus.md).
DROP FUNCTION IF EXISTS cronbox.dispatch(integer, bigint[], interval);
DROP FUNCTION IF EXISTS cronbox.dispatch_at(integer, bigint[], interval, timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.dispatch_ahead(integer, interval);
DROP FUNCTION IF EXISTS cronbox.dispatch_ahead_at(integer, interval, timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.dispatch_locked(bigint[], bigint[], interval, timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.ready_lanes();
-- record_finished reads its jobs in the caller's bucket set (docs/citus.md).
DROP FUNCTION IF EXISTS cronbox.record_finished(bigint[], timestamp with time zone);
-- saturation's claim and relock take p_bucket and return each job's bucket (docs/citus.md).
DROP FUNCTION IF EXISTS cronbox.claim_saturation(integer, interval);
DROP FUNCTION IF EXISTS cronbox.claim_saturation_at(integer, interval, timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.relock_saturation(bigint[]);
-- saturation's store takes p_bucket (its statements per bucket), record_excluded the bucket set.
DROP FUNCTION IF EXISTS cronbox.store_fires(bigint[], timestamp with time zone[], boolean[], bigint[], timestamp with time zone[], timestamp with time zone[], boolean[], text[], timestamp with time zone[], bigint[], boolean[]);
DROP FUNCTION IF EXISTS cronbox.store_fires_at(bigint[], timestamp with time zone[], boolean[], bigint[], timestamp with time zone[], timestamp with time zone[], boolean[], text[], timestamp with time zone[], bigint[], boolean[], timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.record_excluded(bigint[], timestamp with time zone[], boolean[], text[], timestamp with time zone);
-- early dispatch resumes its walk (p_walked_to, p_walked_id; walked_to, walked_id returned).
DROP FUNCTION IF EXISTS cronbox.dispatch_ahead(integer, interval, integer);
DROP FUNCTION IF EXISTS cronbox.dispatch_ahead_at(integer, interval, integer, timestamp with time zone);
-- claim_backfills and store_backfill gained p_bucket (and the claim its rows' bucket).
DROP FUNCTION IF EXISTS cronbox.claim_backfills(integer);
DROP FUNCTION IF EXISTS cronbox.claim_backfills_at(integer, timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.store_backfill(bigint[], timestamp with time zone[], boolean[], text[], bigint[], timestamp with time zone[]);
DROP FUNCTION IF EXISTS cronbox.store_backfill_at(bigint[], timestamp with time zone[], boolean[], text[], bigint[], timestamp with time zone[], timestamp with time zone);
-- quarantine_job and notify_stakeholders gained p_bucket.
DROP FUNCTION IF EXISTS cronbox.quarantine_job(bigint, text);
DROP FUNCTION IF EXISTS cronbox.notify_stakeholders(bigint[]);
-- due_jobs, due_ahead, reap_lost, release_holds and resume_paused gained p_bucket.
DROP FUNCTION IF EXISTS cronbox.due_jobs(integer);
DROP FUNCTION IF EXISTS cronbox.due_ahead(interval, integer);
DROP FUNCTION IF EXISTS cronbox.reap_lost(integer);
DROP FUNCTION IF EXISTS cronbox.reap_lost_at(integer, timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.release_holds(integer);
DROP FUNCTION IF EXISTS cronbox.release_holds_at(integer, timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.resume_paused(integer);
DROP FUNCTION IF EXISTS cronbox.resume_paused_at(integer, timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.release_futures(bigint[]);
-- resume_at gained p_bucket (the job's bucket: every statement on that bucket's rows).
DROP FUNCTION IF EXISTS cronbox.resume_at(text, text, timestamp with time zone, timestamp with time zone);
-- the Citus layer's cronbox.new_run_id(bucket_index) is the core cronbox.new_bucket_run_id(bucket_index).
DROP FUNCTION IF EXISTS cronbox.new_run_id(integer);
-- dispatch's write flags early 'skip' runs as it inserts them: p_claim_at_due (migration 0466).
DROP FUNCTION IF EXISTS cronbox.dispatch_locked(bigint[], bigint[], interval, timestamp with time zone, integer[]);
DROP FUNCTION IF EXISTS cronbox.dispatch_plain(bigint[], interval, timestamp with time zone, integer[]);
-- the finishing calls by bucket: finish_runs and finish_decisions take p_bucket.
DROP FUNCTION IF EXISTS cronbox.finish_runs(bigint[],text,jsonb[],text[],boolean,timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.finish_decisions(cronbox.finished_run[]);
-- the fixed-delay hook takes the job's bucket (finish_runs passes its p_bucket).
DROP FUNCTION IF EXISTS cronbox.schedule_next_fixed_delay(bigint,timestamp with time zone);
-- the fold of job statistics by bucket: fold_job_stats and apply_job_stat_changes take p_bucket.
DROP FUNCTION IF EXISTS cronbox.fold_job_stats(integer);
DROP FUNCTION IF EXISTS cronbox.apply_job_stat_changes(bigint[],bigint[]);
-- a job found by name in its bucket: lock_job_named takes the bucket, fold_job_stats_of and
-- add_job_rows may be given it.
DROP FUNCTION IF EXISTS cronbox.lock_job_named(text);
DROP FUNCTION IF EXISTS cronbox.fold_job_stats_of(bigint[]);
DROP FUNCTION IF EXISTS cronbox.add_job_rows(bigint[]);
DROP FUNCTION IF EXISTS cronbox.withdraw_early_runs(bigint,text,timestamp with time zone);
-- the loose scan of ready futures by priority went with job_future_ready_idx (0485): the reads
-- across queues walk the lanes (cronbox.ready_lanes).
DROP FUNCTION IF EXISTS cronbox.ready_priorities();
-- the 'finished' row's helpers went back into cronbox.record_finished, its one caller.
DROP FUNCTION IF EXISTS cronbox.log_finished(bigint[], text[], text[], timestamp with time zone[], timestamp with time zone);
DROP FUNCTION IF EXISTS cronbox.finished_reason(integer, bigint, text, timestamp with time zone);
-- a finish is read from the job's state (cronbox.job_finishes): record_finished logs it, with the
-- time the view shows, only before schedule() reopens or unschedule() deletes the job.
DROP FUNCTION IF EXISTS cronbox.record_finished(bigint[], timestamp with time zone, integer[]);
-- list_queues gained p_bucket (a relay on Citus reads the queues bucket by bucket).
DROP FUNCTION IF EXISTS cronbox.list_queues();
DROP FUNCTION IF EXISTS cronbox.lock_matching_jobs(text,text,text,boolean);
DROP FUNCTION IF EXISTS cronbox.withdraw_early_runs_of(bigint[],text,timestamp with time zone);
