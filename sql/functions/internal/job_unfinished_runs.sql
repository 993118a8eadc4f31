-- cronbox.job_unfinished_runs(p_job_id): the job's runs not finished yet (dispatched,
-- delivered, running), newest first: its in-flight outbox rows (a run is its outbox row until
-- its final report). The outbox has no job_id index: a walk of the outbox, which holds only
-- the runs in flight and the messages waiting (docs/architecture.md, open questions); called
-- for cancel_other and withdrawals, with the job locked. LANGUAGE sql, STABLE, no SET clause:
-- inlined into the caller's statement.
CREATE OR REPLACE FUNCTION cronbox.job_unfinished_runs(p_job_id bigint)
RETURNS TABLE (run_id bigint, state text, dispatched_at timestamptz, cancel_requested boolean)
LANGUAGE sql STABLE
SECURITY INVOKER
AS $$
    SELECT o.outbox_id, o.state, o.dispatched_at, o.cancel_requested
    FROM cronbox.outbox o
    WHERE o.job_id = p_job_id AND o.kind = 'run'
    ORDER BY o.outbox_id DESC
$$;

COMMENT ON FUNCTION cronbox.job_unfinished_runs(bigint) IS
'Internal: a job''s unfinished runs (its in-flight outbox rows), newest first (call with the job locked).';

ALTER FUNCTION cronbox.job_unfinished_runs(bigint) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.job_unfinished_runs(bigint) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
