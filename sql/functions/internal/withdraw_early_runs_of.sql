-- cronbox.withdraw_early_runs_of(p_job_ids, p_reason, p_now, p_buckets): cronbox.withdraw_early_runs for
-- a set of jobs at once (bulk pause): their runs written by early dispatch, still waiting for
-- their due time, whose message no relay has claimed yet, are cancelled (error = p_reason) and
-- their messages deleted. Found from the outbox side, whatever the jobs' history: the messages
-- not available yet of the jobs' queues (outbox_queue_idx, a range per queue: only the early
-- ones), kept when their run is of one of the jobs. Call with the jobs locked. Returns
-- {job_id: runs withdrawn} for the jobs that had any ({} when none). p_buckets: the jobs'
-- buckets (every statement reads those buckets' rows only; a bulk pause goes bucket by bucket).
CREATE OR REPLACE FUNCTION cronbox.withdraw_early_runs_of(
    p_job_ids bigint[],
    p_reason text,
    p_now timestamptz,
    p_buckets integer[]
) RETURNS jsonb
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_ids bigint[];
    v_per_job jsonb;
BEGIN
    -- These jobs' runs dispatched as of a time still to come, not under a relay's lease (their
    -- outbox rows: a run is its outbox row until its final report), found through the queues'
    -- walks of outbox_queue_idx.
    SELECT array_agg(o.outbox_id ORDER BY o.outbox_id) INTO v_ids
    FROM (SELECT DISTINCT j.queue FROM cronbox.job j WHERE j.bucket = ANY (p_buckets) AND j.job_id = ANY (p_job_ids)) q
    CROSS JOIN LATERAL (
        SELECT o.outbox_id, o.job_id FROM cronbox.outbox o
        WHERE o.bucket = ANY (p_buckets) AND o.queue = q.queue AND o.available_at > p_now AND o.kind = 'run' AND o.state = 'dispatched'
          AND (o.lease_until IS NULL OR o.lease_until <= p_now)) o
    WHERE o.job_id = ANY (p_job_ids);
    IF v_ids IS NULL THEN
        RETURN '{}';
    END IF;
    SELECT jsonb_object_agg(c.job_id::text, c.n) INTO v_per_job
    FROM (SELECT o.job_id, count(*) AS n FROM cronbox.outbox o
          WHERE o.bucket = ANY (p_buckets) AND o.outbox_id = ANY (v_ids) GROUP BY o.job_id) c;
    PERFORM cronbox.finish_runs(v_ids, 'cancelled', NULL,
                                array_fill(p_reason, ARRAY[cardinality(v_ids)]), false, p_now,
                                CASE WHEN cardinality(p_buckets) = 1 THEN p_buckets[1] END);
    RETURN v_per_job;
END
$$;

COMMENT ON FUNCTION cronbox.withdraw_early_runs_of(bigint[], text, timestamp with time zone, integer[]) IS
'Internal: cancels the early-dispatched runs of a set of jobs whose messages no relay holds yet (bulk pause), found from the outbox; returns {job_id: count}.';

ALTER FUNCTION cronbox.withdraw_early_runs_of(bigint[], text, timestamp with time zone, integer[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.withdraw_early_runs_of(bigint[], text, timestamp with time zone, integer[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
