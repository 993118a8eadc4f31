-- cronbox.start_runs(run_ids, worker): start_run for a batch (the worker kit's push mode gets
-- its messages in batches from the relay): one statement and one transaction for the batch
-- instead of one of each per run (a durable commit per run). Each run is started as start_run
-- starts it, or refused with the error start_run would raise, in its own row: `deadline` (the
-- run's lease end) when started, else `code` ('P0002': unknown to this caller, '55000': finished,
-- asked to cancel or running on another worker) and `error` (start_run's message). Rows in the
-- order of run_ids; a duplicate id is answered once per occurrence (the second sees the first's
-- start: the same worker's repeat returns the lease). At most 10,000 ids, none NULL
-- A loop over cronbox.start_run_try (internal/start_run_try.sql, start_run's work with its
-- refusal returned, not raised): no subtransaction per run (past 64 in one transaction, every
-- other session's snapshot checks would read pg_subtrans while it is open). The worker grants
-- (docs/operations.md, "Tenants") as start_run applies them (cronbox.worker_run_ids): a run of a
-- queue the caller may not work is unknown to it.
CREATE OR REPLACE FUNCTION cronbox.start_runs(
    run_ids bigint[],
    worker text
) RETURNS TABLE (run_id bigint, deadline timestamptz, code text, error text)
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_id bigint;
    v_limited boolean;  -- worker grants apply to this caller
    v_try record;
BEGIN
    PERFORM cronbox.assert_run_ids(start_runs.run_ids, NULL, NULL);
    PERFORM cronbox.assert_worker(start_runs.worker);
    IF start_runs.worker IS NULL OR start_runs.worker = '' THEN
        RAISE EXCEPTION 'worker: must name the worker' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    v_limited := EXISTS (SELECT 1 FROM cronbox.queue_grant g WHERE g.kind = 'worker') AND NOT cronbox.caller_is_operator();
    FOREACH v_id IN ARRAY start_runs.run_ids LOOP
        run_id := v_id;
        IF v_limited AND EXISTS (
                SELECT 1 FROM (SELECT o.queue FROM cronbox.outbox o WHERE o.outbox_id = v_id AND o.kind = 'run'
                               UNION ALL
                               SELECT r.queue FROM cronbox.run r WHERE r.run_id = v_id) x
                WHERE NOT cronbox.worker_may_work(x.queue)) THEN
            deadline := NULL;
            code := 'P0002';
            error := format('run_id: no run %s', v_id);
        ELSE
            v_try := cronbox.start_run_try(v_id, start_runs.worker, now());
            deadline := v_try.deadline;
            code := v_try.code;
            error := v_try.error;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;

COMMENT ON FUNCTION cronbox.start_runs(bigint[], text) IS
'Worker (optional): start_run for a batch of runs in one statement: each started (its deadline) or refused (code P0002 or 55000 and start_run''s message) in its own row, in the order given; at most 10,000 ids.';

ALTER FUNCTION cronbox.start_runs(bigint[], text) OWNER TO cronbox_runner;
REVOKE ALL ON FUNCTION cronbox.start_runs(bigint[], text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.start_runs(bigint[], text) TO cronbox_worker;
