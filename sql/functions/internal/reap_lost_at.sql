-- Internal: the body of cronbox.reap_lost, with the time as its last parameter p_now. The public
-- cronbox.reap_lost passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.reap_lost_at(p_limit, p_bucket, p_now): the poller's reaper. Runs delivered or running whose
-- lease expired (no heartbeat or report within the job's timeout) are declared lost (a
-- crash; cancelled if cancellation was requested) and retried per the job's policy, through
-- cronbox.finish_runs. Candidates come from the outbox (a walk) without locks (finish_runs locks
-- jobs before runs, the order dispatch relies on) and are re-checked under lock, so two
-- reapers never double-count a run. Returns how many runs were declared lost or cancelled.
-- p_bucket: the candidates of that bucket only, the walk filtered on it (one task where the
-- outbox is distributed) and their end in it (cronbox.finish_runs with the bucket); NULL: every
-- bucket.
CREATE OR REPLACE FUNCTION cronbox.reap_lost_at(
    p_limit integer DEFAULT 1000,
    p_bucket integer DEFAULT NULL,
    p_now timestamptz DEFAULT now()
) RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Row estimates through CTEs are rough; JIT compiling this short statement costs more than it runs.
SET jit = off
SET enable_seqscan = off  -- a plan kept from an empty table: docs/architecture.md, SQL conventions
AS $$
DECLARE
    v_set integer[];  -- the buckets walked; NULL: every bucket
    v_ids bigint[];
    v_errors text[];
    v_n integer;
BEGIN
    IF p_bucket IS NOT NULL THEN
        v_set := ARRAY(SELECT unnest(cronbox.bucket_walks('cronbox.outbox', p_bucket)));
    END IF;
    SELECT array_agg(x.run_id), array_agg(x.error) INTO v_ids, v_errors
    FROM (SELECT r.outbox_id AS run_id,
                 format('lost: lease expired at %s (no heartbeat or report within the timeout)',
                        r.run_lease_until) AS error
          -- the runs in flight are their outbox rows: delivered and running ones by their
          -- lease (outbox_run_lease_until_idx: a backlog of messages waiting is not walked)
          FROM cronbox.outbox r
          WHERE r.kind = 'run' AND r.run_lease_until < p_now AND (v_set IS NULL OR r.bucket = ANY (v_set))
            AND r.state IN ('delivered', 'running')
          ORDER BY r.run_lease_until
          LIMIT p_limit) x;
    IF v_ids IS NULL THEN
        RETURN 0;
    END IF;
    SELECT count(*) INTO v_n
    FROM cronbox.finish_runs(v_ids, 'lost', NULL, v_errors, true, p_now, p_bucket) f
    WHERE f.verdict = 'finished';
    RETURN v_n;
END
$$;

COMMENT ON FUNCTION cronbox.reap_lost_at(integer, integer, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.reap_lost(integer, integer) with the time as p_now; tests use it to fix the clock. Poller: declares up to p_limit runs whose lease expired lost (or cancelled when asked to) and applies the retry policy; p_bucket: that bucket''s runs only (NULL: every bucket). Returns the count.';

ALTER FUNCTION cronbox.reap_lost_at(integer, integer, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.reap_lost_at(integer, integer, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
