-- cronbox.record_change(job_id, name, action, reason, p_now): appends one row to the
-- schedule change log (cronbox.job_change, shown as cronbox.schedule_changes), attributing
-- it to cronbox.caller() (the SET ROLE or login role, also under SECURITY DEFINER). No locks
-- beyond the insert.
CREATE OR REPLACE FUNCTION cronbox.record_change(
    p_job_id bigint, p_job_name text, p_action text, p_reason text, p_now timestamptz DEFAULT now()
) RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO cronbox.job_change (job_id, job_name, action, reason, changed_by, changed_at)
    VALUES (p_job_id, p_job_name, p_action, p_reason, cronbox.caller(), p_now)
$$;

COMMENT ON FUNCTION cronbox.record_change(bigint,text,text,text,timestamp with time zone) IS
'Internal: appends a row to the schedule change log (cronbox.schedule_changes).';

ALTER FUNCTION cronbox.record_change(bigint,text,text,text,timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.record_change(bigint,text,text,text,timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
