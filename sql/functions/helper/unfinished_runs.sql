-- cronbox.unfinished_runs(): the runs not finished yet (dispatched, delivered, running) that
-- the caller may see, with their job, queue and state: the in-flight outbox rows (a run is its
-- outbox row until its final report). Costs the number of unfinished runs and waiting
-- messages, however large history is. For psql, the web console's state filter,
-- cronbox.queues, the metrics and the queue limits' recount.
-- SECURITY DEFINER only to read the outbox, which no cronbox role may read directly; row
-- security on the outbox (the owner of the run's job) still decides which runs come out; a
-- worker limited to queues sees the runs of the queues it may work (cronbox.worker_may_work).
-- PL/pgSQL so that it carries the caller to Citus's worker nodes first (cronbox.carry_caller).
CREATE OR REPLACE FUNCTION cronbox.unfinished_runs()
RETURNS TABLE (run_id bigint, job_id bigint, queue text, state text)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM cronbox.carry_caller();  -- on Citus, the caller for the policies on the worker nodes
    RETURN QUERY
    SELECT o.outbox_id, o.job_id, o.queue, o.state
    FROM cronbox.outbox o
    WHERE o.kind = 'run'
      AND (NOT (SELECT cronbox.caller_work_scoped()) OR cronbox.worker_may_work(o.queue));
END
$$;

COMMENT ON FUNCTION cronbox.unfinished_runs() IS
'The runs not finished yet (dispatched, delivered, running) the caller may see: run_id, job_id, queue, state. Read from the outbox (a run is its outbox row until it is final), so it costs the number of unfinished runs, not the size of history.';

ALTER FUNCTION cronbox.unfinished_runs() OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.unfinished_runs() FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.unfinished_runs() TO cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
