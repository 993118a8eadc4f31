-- cronbox.worker_denied_run_ids(p_ids): the ids of p_ids (sorted, each once) whose run is of a
-- queue the caller may not work (cronbox.worker_may_work): for a worker limited to queues, such a
-- run is an unknown run (docs/operations.md, "Tenants"). '{}' while no worker grant exists, or for
-- an operator (one probe and nothing else). Otherwise reads the runs' queues by key, in flight
-- (the outbox) or final (history, the batch's bounds as values: one partition per day of history
-- is pruned, docs/architecture.md, SQL conventions 6), each queue judged once. NULLs and ids of
-- no run are not denied (the caller's own checks answer them). No locks. Used by
-- cronbox.worker_run_ids (which raises for the smallest) and cronbox.start_runs (which answers
-- each denied id as unknown, in its own row).
CREATE OR REPLACE FUNCTION cronbox.worker_denied_run_ids(p_ids bigint[]) RETURNS bigint[]
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_lo bigint;
    v_hi bigint;
    v_denied text[];
BEGIN
    IF p_ids IS NULL OR cardinality(p_ids) = 0 THEN
        RETURN '{}';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM cronbox.queue_grant g WHERE g.kind = 'worker') THEN
        RETURN '{}';  -- the default: no worker is limited
    END IF;
    IF cronbox.caller_is_operator() THEN
        RETURN '{}';
    END IF;
    SELECT min(u.id), max(u.id) INTO v_lo, v_hi FROM unnest(p_ids) AS u(id);
    -- the queues of the runs (few), each judged once
    SELECT array_agg(DISTINCT x.queue) INTO v_denied
    FROM (SELECT o.queue FROM cronbox.outbox o WHERE o.outbox_id = ANY (p_ids) AND o.kind = 'run'
          UNION ALL
          SELECT r.queue FROM cronbox.run r WHERE r.run_id = ANY (p_ids) AND r.run_id BETWEEN v_lo AND v_hi) x;
    SELECT array_agg(q.queue) INTO v_denied
    FROM unnest(v_denied) AS q(queue)
    WHERE NOT cronbox.worker_may_work(q.queue);
    IF v_denied IS NULL THEN
        RETURN '{}';
    END IF;
    RETURN ARRAY(
        SELECT DISTINCT x.run_id
        FROM (SELECT o.outbox_id AS run_id FROM cronbox.outbox o
              WHERE o.outbox_id = ANY (p_ids) AND o.kind = 'run' AND o.queue = ANY (v_denied)
              UNION ALL
              SELECT r.run_id FROM cronbox.run r
              WHERE r.run_id = ANY (p_ids) AND r.run_id BETWEEN v_lo AND v_hi AND r.queue = ANY (v_denied)) x
        ORDER BY 1);
END
$$;

COMMENT ON FUNCTION cronbox.worker_denied_run_ids(bigint[]) IS
'Internal: the given run ids (sorted, each once) whose queue the caller may not work (a limited worker: unknown runs to it); empty when none, or when no worker grant exists or the caller is an operator.';

ALTER FUNCTION cronbox.worker_denied_run_ids(bigint[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.worker_denied_run_ids(bigint[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
