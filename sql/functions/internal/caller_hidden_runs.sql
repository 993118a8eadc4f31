-- cronbox.caller_hidden_runs(p_ids): the owner rule of the report functions, which run as
-- cronbox_runner, a role the row-security policies let through (migration 0440). NULL, at
-- once, for a caller whose calls may change any schedule's rows (cronbox.caller_writes_all():
-- every cronbox_worker and cronbox_process member, operators): the policies filtered nothing
-- for them. For any other caller (one that reaches a report function through another role's
-- SECURITY DEFINER function), the ids of p_ids that are not runs of a job it owns, in flight
-- (the outbox, by key) or final (history, by key): exactly the rows the policies hid from it
-- (outbox_read, run_read: the row's job, owned by the caller). The report functions treat
-- them as unknown runs. No locks.
CREATE OR REPLACE FUNCTION cronbox.caller_hidden_runs(p_ids bigint[]) RETURNS bigint[]
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF cronbox.caller_writes_all() THEN
        RETURN NULL;
    END IF;
    RETURN ARRAY(
        SELECT u.id FROM unnest(p_ids) AS u(id)
        WHERE u.id IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM cronbox.outbox o JOIN cronbox.job j ON j.job_id = o.job_id
                          WHERE o.outbox_id = u.id AND j.owner = cronbox.caller())
          AND NOT EXISTS (SELECT 1 FROM cronbox.run r JOIN cronbox.job j ON j.job_id = r.job_id
                          WHERE r.run_id = u.id AND j.owner = cronbox.caller()));
END
$$;

COMMENT ON FUNCTION cronbox.caller_hidden_runs(bigint[]) IS
'Internal: NULL when the caller may report on every run; otherwise the given run ids that are not runs of a job the caller owns (the report functions answer them as unknown runs).';

ALTER FUNCTION cronbox.caller_hidden_runs(bigint[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.caller_hidden_runs(bigint[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
