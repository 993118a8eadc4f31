-- cronbox.withdraw_early_runs(p_job_id, p_reason, p_now, p_bucket): pause(), unschedule(), a schedule
-- update and add_dependency() reach the fires already written by early dispatch
-- (CRONBOX_DISPATCH_LEAD, on by default): runs still
-- waiting for their due time whose message no relay has claimed yet are cancelled (error =
-- p_reason) and their messages deleted. A message a relay already holds is not recalled: it is
-- sent at its time (docs/runs.md, "Early dispatch"). Call with the job locked. Returns the
-- number withdrawn. With p_bucket (the job's bucket) every statement reads and writes that
-- bucket alone (one task on Citus); NULL: wherever the job's rows are.
CREATE OR REPLACE FUNCTION cronbox.withdraw_early_runs(
    p_job_id bigint,
    p_reason text,
    p_now timestamptz DEFAULT now(),
    p_bucket integer DEFAULT NULL
) RETURNS integer
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_ids bigint[];
BEGIN
    -- Its count of unfinished runs exact first (statistics folded off the hot path,
    -- cronbox.job_stat_folded: a no-op when nothing waits to be folded).
    PERFORM cronbox.fold_job_stats_of(ARRAY[p_job_id], p_bucket);
    -- The job's runs dispatched as of a time still to come (among its unfinished runs, which
    -- the caller's lock on the job keeps counted: its in-flight outbox rows, as
    -- cronbox.job_unfinished_runs reads them) whose message no relay holds; usually none.
    v_ids := ARRAY(
        SELECT o.outbox_id FROM cronbox.outbox o
        WHERE (p_bucket IS NULL OR o.bucket = p_bucket) AND o.job_id = p_job_id AND o.kind = 'run'
          AND o.state = 'dispatched' AND o.dispatched_at > p_now
          AND (o.lease_until IS NULL OR o.lease_until <= p_now) AND o.available_at > p_now
        ORDER BY o.outbox_id);
    IF cardinality(v_ids) = 0 THEN
        RETURN 0;
    END IF;
    PERFORM cronbox.finish_runs(v_ids, 'cancelled', NULL,
                                array_fill(p_reason, ARRAY[cardinality(v_ids)]), false, p_now, p_bucket);
    RETURN cardinality(v_ids);
END
$$;

COMMENT ON FUNCTION cronbox.withdraw_early_runs(bigint,text,timestamp with time zone,integer) IS
'Internal: cancels a job''s early-dispatched runs whose message no relay holds yet (pause, unschedule, schedule update). Returns the count.';

ALTER FUNCTION cronbox.withdraw_early_runs(bigint,text,timestamp with time zone,integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.withdraw_early_runs(bigint,text,timestamp with time zone,integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
