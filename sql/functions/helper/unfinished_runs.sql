-- cronbox.unfinished_runs(): the runs not finished yet (dispatched, delivered, running) that
-- the caller may see, with their job, queue and state. No index of cronbox.run names the state
-- (migration 0190: a run's last update stays heap-only), so they are found where they are
-- anyway: a dispatched run has its outbox row, a delivered or running run
-- its lease (run_lease_idx); each candidate is probed by primary key and its state re-read.
-- Costs the number of unfinished runs, however large history is. For psql, the web console's
-- state filter, cronbox.queues, the metrics and the queue limits' recount.
-- SECURITY DEFINER only to read the outbox, which no cronbox role may read directly; row
-- security on cronbox.run still decides which runs come out; a worker limited to queues sees
-- the runs of the queues it may work (cronbox.worker_may_work).
CREATE OR REPLACE FUNCTION cronbox.unfinished_runs()
RETURNS TABLE (run_id bigint, job_id bigint, queue text, state text)
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT r.run_id, r.job_id, r.queue, r.state
    FROM cronbox.run r
    WHERE r.lease_until IS NOT NULL AND r.state IN ('dispatched', 'delivered', 'running')
      AND (NOT (SELECT cronbox.caller_work_scoped()) OR cronbox.worker_may_work(r.queue))
    UNION ALL
    -- a run has at most one outbox row; one with a lease came in above
    SELECT r.run_id, r.job_id, r.queue, r.state
    FROM cronbox.outbox o
    JOIN cronbox.run r ON r.run_id = o.run_id
    WHERE o.kind = 'run' AND r.lease_until IS NULL AND r.state IN ('dispatched', 'delivered', 'running')
      AND (NOT (SELECT cronbox.caller_work_scoped()) OR cronbox.worker_may_work(r.queue))
$$;

COMMENT ON FUNCTION cronbox.unfinished_runs() IS
'The runs not finished yet (dispatched, delivered, running) the caller may see: run_id, job_id, queue, state. Found through the outbox and the leases, so it costs the number of unfinished runs, not the size of history (no index of cronbox.run names the state).';

ALTER FUNCTION cronbox.unfinished_runs() OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.unfinished_runs() FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.unfinished_runs() TO cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
