-- 0357 (Citus only, with --distribute, after 0356): on the distributed tables, a job's other
-- rows (futures, statistics, fires, backfills, outbox, history) are read and changed by a
-- caller limited to its own schedules when it owns their job, as on one primary, where 0356
-- let through only the callers that read or write every schedule's rows. The owner is checked
-- by a plain call, cronbox.caller_owns_job(bucket, job_id) (Citus refuses subqueries in
-- policies), on the worker node holding the row, where cronbox.caller() is the caller the
-- coordinator carried (cronbox.carry_caller). Inserts stay open (WITH CHECK true, as on one
-- primary: the functions insert only rows of jobs they have read through the job's policy).
DO $$
DECLARE
    p record;
BEGIN
    FOR p IN SELECT c.oid::regclass AS t, pol.polname, pol.polcmd,
                    pol.polqual IS NOT NULL AS has_qual, pol.polwithcheck IS NOT NULL AS has_check
             FROM pg_catalog.pg_policy pol JOIN pg_catalog.pg_class c ON c.oid = pol.polrelid
             WHERE c.relnamespace = 'cronbox'::regnamespace
               AND c.relname IN ('job_future', 'job_stat', 'job_fire', 'backfill', 'outbox', 'run')
               AND pol.polcmd IN ('r', 'w', 'd')
               AND pg_catalog.pg_get_expr(pol.polqual, pol.polrelid)
                   IN ('cronbox.caller_reads_all()', 'cronbox.caller_writes_all()') LOOP
        EXECUTE format('ALTER POLICY %I ON %s%s%s', p.polname, p.t,
                       CASE WHEN p.has_qual THEN format(' USING (cronbox.%s() OR cronbox.caller_owns_job(bucket, job_id))',
                                                        CASE WHEN p.polcmd = 'r' THEN 'caller_reads_all' ELSE 'caller_writes_all' END) END,
                       CASE WHEN p.has_check THEN ' WITH CHECK (cronbox.caller_writes_all() OR cronbox.caller_owns_job(bucket, job_id))' END);
    END LOOP;
END
$$;
