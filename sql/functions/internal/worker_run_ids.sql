-- cronbox.worker_run_ids(p_ids, p_field): the run ids a worker function was given, checked:
-- a run of a queue the caller may not work (cronbox.worker_may_work) is reported as P0002
-- '<p_field>: no run N', as an unknown run is (row security's answer: it does not exist for
-- this role). Returns p_ids unchanged. While no worker grant exists, or for an operator, one
-- probe and nothing else. Otherwise reads the runs' queues by key, the batch's bounds as
-- values (one partition per day of history is pruned, docs/architecture.md, SQL conventions 6).
-- NULLs pass (the worker function's own checks refuse them). No locks.
CREATE OR REPLACE FUNCTION cronbox.worker_run_ids(p_ids bigint[], p_field text) RETURNS bigint[]
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_lo bigint;
    v_hi bigint;
    v_bad bigint;
    v_denied text[];
BEGIN
    IF p_ids IS NULL OR cardinality(p_ids) = 0 OR cardinality(p_ids) > 10000 THEN
        RETURN p_ids;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM cronbox.queue_grant g WHERE g.kind = 'worker') THEN
        RETURN p_ids;  -- the default: no worker is limited
    END IF;
    IF cronbox.caller_is_operator() THEN
        RETURN p_ids;
    END IF;
    SELECT min(u.id), max(u.id) INTO v_lo, v_hi FROM unnest(p_ids) AS u(id);
    -- the queues of the runs (few), each judged once: in flight (the outbox, by key), or final
    -- (history, by key, the bounds as values)
    SELECT array_agg(DISTINCT x.queue) INTO v_denied
    FROM (SELECT o.queue FROM cronbox.outbox o WHERE o.outbox_id = ANY (p_ids) AND o.kind = 'run'
          UNION ALL
          SELECT r.queue FROM cronbox.run r WHERE r.run_id = ANY (p_ids) AND r.run_id BETWEEN v_lo AND v_hi) x;
    SELECT array_agg(q.queue) INTO v_denied
    FROM unnest(v_denied) AS q(queue)
    WHERE NOT cronbox.worker_may_work(q.queue);
    IF v_denied IS NOT NULL THEN
        SELECT min(x.run_id) INTO v_bad
        FROM (SELECT o.outbox_id AS run_id FROM cronbox.outbox o
              WHERE o.outbox_id = ANY (p_ids) AND o.kind = 'run' AND o.queue = ANY (v_denied)
              UNION ALL
              SELECT r.run_id FROM cronbox.run r
              WHERE r.run_id = ANY (p_ids) AND r.run_id BETWEEN v_lo AND v_hi AND r.queue = ANY (v_denied)) x;
    END IF;
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION '%: no run %', p_field, v_bad USING ERRCODE = 'no_data_found';
    END IF;
    RETURN p_ids;
END
$$;

COMMENT ON FUNCTION cronbox.worker_run_ids(bigint[], text) IS
'Internal: returns the run ids when the caller may work every one''s queue; otherwise P0002 "<field>: no run N", as for an unknown run.';

ALTER FUNCTION cronbox.worker_run_ids(bigint[], text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.worker_run_ids(bigint[], text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
