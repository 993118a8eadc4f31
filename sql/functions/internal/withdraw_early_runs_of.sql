-- cronbox.withdraw_early_runs_of(p_job_ids, p_reason, p_now): cronbox.withdraw_early_runs for
-- a set of jobs at once (bulk pause): their runs written by early dispatch, still waiting for
-- their due time, whose message no relay has claimed yet, are cancelled (error = p_reason) and
-- their messages deleted. Found from the outbox side, whatever the jobs' history: the messages
-- not available yet of the jobs' queues (outbox_queue_idx, a range per queue: only the early
-- ones), kept when their run is of one of the jobs. Call with the jobs locked. Returns
-- {job_id: runs withdrawn} for the jobs that had any ({} when none).
CREATE OR REPLACE FUNCTION cronbox.withdraw_early_runs_of(
    p_job_ids bigint[],
    p_reason text,
    p_now timestamptz
) RETURNS jsonb
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_outbox bigint[];
    v_runs bigint[];
    v_lo bigint;
    v_hi bigint;
    v_ids bigint[];
    v_per_job jsonb;
BEGIN
    SELECT array_agg(o.outbox_id), array_agg(o.run_id), min(o.run_id), max(o.run_id)
      INTO v_outbox, v_runs, v_lo, v_hi
    FROM (SELECT DISTINCT j.queue FROM cronbox.job j WHERE j.job_id = ANY (p_job_ids)) q
    CROSS JOIN LATERAL (
        SELECT o.outbox_id, o.run_id FROM cronbox.outbox o
        WHERE o.queue = q.queue AND o.available_at > p_now AND o.kind = 'run'
          AND (o.lease_until IS NULL OR o.lease_until <= p_now)) o;
    IF v_outbox IS NULL THEN
        RETURN '{}';
    END IF;
    -- the runs of these jobs among them (by key, the batch's bounds as values)
    SELECT array_agg(r.run_id) INTO v_runs
    FROM cronbox.run r
    WHERE r.run_id = ANY (v_runs) AND r.run_id BETWEEN v_lo AND v_hi
      AND r.job_id = ANY (p_job_ids) AND r.state = 'dispatched';
    IF v_runs IS NULL THEN
        RETURN '{}';
    END IF;
    WITH early AS (
        DELETE FROM cronbox.outbox o
        WHERE o.outbox_id = ANY (v_outbox) AND o.run_id = ANY (v_runs)
          AND o.available_at > p_now AND (o.lease_until IS NULL OR o.lease_until <= p_now)
        RETURNING o.run_id
    )
    SELECT array_agg(early.run_id ORDER BY early.run_id) INTO v_ids FROM early;
    IF v_ids IS NULL THEN
        RETURN '{}';
    END IF;
    SELECT jsonb_object_agg(c.job_id::text, c.n) INTO v_per_job
    FROM (SELECT r.job_id, count(*) AS n FROM cronbox.run r
          WHERE r.run_id = ANY (v_ids) AND r.run_id BETWEEN v_ids[1] AND v_ids[cardinality(v_ids)]
          GROUP BY r.job_id) c;
    PERFORM cronbox.finish_runs(v_ids, 'cancelled', NULL,
                                array_fill(p_reason, ARRAY[cardinality(v_ids)]), false, p_now);
    RETURN v_per_job;
END
$$;

COMMENT ON FUNCTION cronbox.withdraw_early_runs_of(bigint[], text, timestamp with time zone) IS
'Internal: cancels the early-dispatched runs of a set of jobs whose messages no relay holds yet (bulk pause), found from the outbox; returns {job_id: count}.';

ALTER FUNCTION cronbox.withdraw_early_runs_of(bigint[], text, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.withdraw_early_runs_of(bigint[], text, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
