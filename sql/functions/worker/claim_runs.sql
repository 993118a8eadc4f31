-- cronbox.claim_runs(queue, worker, n, with_message): pull mode, for workers that talk to PostgreSQL
-- instead of receiving pushes (queues routed to the `postgres` sink). Takes up to n
-- available run messages of the queue, oldest first, FOR UPDATE SKIP LOCKED on
-- outbox_pull_idx (claimers get disjoint runs), deletes them and marks their runs running on
-- worker with a lease of the job's timeout. Returns the messages, deadline included; with
-- with_message false the message column is NULL, the columns beside it as ever (the worker kit reads
-- those: a jsonb object built per run is ~2 µs of a claim's ~10).
-- A queue the caller may not work (worker grants, docs/operations.md "Tenants"): 42501
-- (cronbox.worker_queue).
-- Thin wrapper: the body is cronbox.claim_runs_at (internal/claim_runs_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.claim_runs(
    queue text,
    worker text,
    n integer DEFAULT 1,
    with_message boolean DEFAULT true
) RETURNS TABLE(run_id bigint, job text, payload jsonb, fire_at timestamp with time zone, attempt integer, deadline timestamp with time zone, idempotency_key text, message jsonb)
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
    SELECT * FROM cronbox.claim_runs_at(cronbox.worker_queue($1), $2, $3, $4, now())
$$;

COMMENT ON FUNCTION cronbox.claim_runs(text, text, integer, boolean) IS
'Pull-mode worker: claims up to n available runs of a queue (SKIP LOCKED: claimers get disjoint runs), marks them running on worker with a lease of the job''s timeout, returns the messages with their deadline (with_message false: the message column NULL, the columns beside it as ever).';

ALTER FUNCTION cronbox.claim_runs(text, text, integer, boolean) OWNER TO cronbox_runner;
REVOKE ALL ON FUNCTION cronbox.claim_runs(text, text, integer, boolean) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.claim_runs(text, text, integer, boolean) TO cronbox_worker;
