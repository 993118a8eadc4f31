-- 0193: the outbox's row-security policies reach the run table through a function.
-- Their `EXISTS (SELECT 1 FROM cronbox.run r ... WHERE r.run_id = outbox.run_id)` arm became a
-- subplan in every statement that reads, updates or deletes outbox rows, the relay's claim and
-- ack and the dispatch's cancel_other withdrawal among them. PostgreSQL starts a subplan with its
-- statement even when the arm before it (the caller sees or writes every row) settles the OR
-- without it, and this one scans run, a table partitioned by day with no key to prune by when it
-- starts: so each such statement opened an index scan on every run partition, each call, for
-- each time it named the outbox. A claim of 1,000 rows cost 14.0 us per run with the 9
-- partitions of a new database and 45.8 us with a year of history kept (bench.sqlcost
-- --history-days 365). A PL/pgSQL function is planned and started only when it is called: for the
-- processes never (the first arm holds), for a role limited to its own schedules once per row,
-- with the run partition found by its key when the call starts.
-- The same rules as before: reading needs the run to be visible to the caller (run_read);
-- updating and deleting need the caller to own the run's job.
CREATE OR REPLACE FUNCTION cronbox.caller_sees_run(p_run_id bigint) RETURNS boolean
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM cronbox.run r WHERE r.run_id = p_run_id);
END
$$;

CREATE OR REPLACE FUNCTION cronbox.caller_owns_run(p_run_id bigint) RETURNS boolean
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM cronbox.run r JOIN cronbox.job j ON j.job_id = r.job_id
                   WHERE r.run_id = p_run_id AND j.owner = cronbox.caller());
END
$$;

DROP POLICY outbox_read ON cronbox.outbox;
DROP POLICY outbox_update ON cronbox.outbox;
DROP POLICY outbox_delete ON cronbox.outbox;
CREATE POLICY outbox_read ON cronbox.outbox FOR SELECT
    USING ((SELECT cronbox.caller_reads_all()) OR cronbox.caller_sees_run(outbox.run_id));
CREATE POLICY outbox_update ON cronbox.outbox FOR UPDATE
    USING ((SELECT cronbox.caller_writes_all()) OR cronbox.caller_owns_run(outbox.run_id));
CREATE POLICY outbox_delete ON cronbox.outbox FOR DELETE
    USING ((SELECT cronbox.caller_writes_all()) OR cronbox.caller_owns_run(outbox.run_id));
