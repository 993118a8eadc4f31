-- cronbox.worker_run_ids(p_ids, p_field): the run ids a worker function was given, checked:
-- a run of a queue the caller may not work (cronbox.worker_may_work) is reported as P0002
-- '<p_field>: no run N', as an unknown run is (row security's answer: it does not exist for
-- this role). Returns p_ids unchanged. While no worker grant exists, or for an operator, one
-- probe and nothing else. Otherwise the denied ids are cronbox.worker_denied_run_ids' (the
-- runs' queues read by key), the smallest reported.
-- NULLs pass (the worker function's own checks refuse them). No locks.
CREATE OR REPLACE FUNCTION cronbox.worker_run_ids(p_ids bigint[], p_field text) RETURNS bigint[]
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_bad bigint;
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
    v_bad := (cronbox.worker_denied_run_ids(p_ids))[1];  -- the smallest
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
