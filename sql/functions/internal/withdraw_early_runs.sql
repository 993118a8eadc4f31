-- cronbox.withdraw_early_runs(p_job_id, p_reason, p_now): pause(), unschedule(), a schedule
-- update and add_dependency() reach the fires already written by early dispatch
-- (CRONBOX_DISPATCH_LEAD, on by default): runs still
-- waiting for their due time whose message no relay has claimed yet are cancelled (error =
-- p_reason) and their messages deleted. A message a relay already holds is not recalled: it is
-- sent at its time (docs/runs.md, "Early dispatch"). Call with the job locked. Returns the
-- number withdrawn.
CREATE OR REPLACE FUNCTION cronbox.withdraw_early_runs(
    p_job_id bigint,
    p_reason text,
    p_now timestamptz DEFAULT now()
) RETURNS integer
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_early bigint[];
    v_ids bigint[];
BEGIN
    -- Its count of unfinished runs exact first (statistics folded off the hot path,
    -- cronbox.job_stat_folded: a no-op when nothing waits to be folded).
    PERFORM cronbox.fold_job_stats_of(ARRAY[p_job_id]);
    -- The job's runs dispatched as of a time still to come (among its unfinished runs, which
    -- the caller's lock on the job keeps counted); usually none, and then the outbox (no index
    -- on run_id) is not read at all.
    SELECT array_agg(u.run_id) INTO v_early
    FROM cronbox.job_unfinished_runs(p_job_id) u
    WHERE u.state = 'dispatched' AND u.dispatched_at > p_now;
    IF v_early IS NULL THEN
        RETURN 0;
    END IF;
    v_ids := ARRAY(
        SELECT o.outbox_id FROM cronbox.outbox o
        WHERE o.outbox_id = ANY (v_early) AND o.kind = 'run'
          AND (o.lease_until IS NULL OR o.lease_until <= p_now) AND o.available_at > p_now
        ORDER BY o.outbox_id);
    IF cardinality(v_ids) = 0 THEN
        RETURN 0;
    END IF;
    PERFORM cronbox.finish_runs(v_ids, 'cancelled', NULL,
                                array_fill(p_reason, ARRAY[cardinality(v_ids)]), false, p_now);
    RETURN cardinality(v_ids);
END
$$;

COMMENT ON FUNCTION cronbox.withdraw_early_runs(bigint,text,timestamp with time zone) IS
'Internal: cancels a job''s early-dispatched runs whose message no relay holds yet (pause, unschedule, schedule update). Returns the count.';

ALTER FUNCTION cronbox.withdraw_early_runs(bigint,text,timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.withdraw_early_runs(bigint,text,timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
