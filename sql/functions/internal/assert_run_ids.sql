-- cronbox.assert_run_ids(run_ids, field, n): the argument checks of a batch of run ids, shared
-- by complete_runs and fail_runs: not NULL, at most 10,000, no NULL element; with `field`, the
-- parallel array named `field` (of n elements) has one element per run id. Raises 22004 /
-- 22023 with a message starting with the parameter's name. Pure; no lock, no write.
CREATE OR REPLACE FUNCTION cronbox.assert_run_ids(
    p_run_ids bigint[], p_field text DEFAULT NULL, p_n integer DEFAULT NULL
) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_run_ids IS NULL THEN
        RAISE EXCEPTION 'run_ids: must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF cardinality(p_run_ids) > 10000 THEN
        RAISE EXCEPTION 'run_ids: must hold at most 10000 runs, got %', cardinality(p_run_ids)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF array_position(p_run_ids, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'run_ids: must not contain NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_field IS NOT NULL AND coalesce(p_n, 0) <> coalesce(array_length(p_run_ids, 1), 0) THEN
        RAISE EXCEPTION '%: must have one element per run_id (% run_ids, % %)',
            p_field, coalesce(array_length(p_run_ids, 1), 0), coalesce(p_n, 0), p_field
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

COMMENT ON FUNCTION cronbox.assert_run_ids(bigint[], text, integer) IS
'Internal argument check of complete_runs/fail_runs: run_ids not NULL, at most 10,000, no NULL element; a parallel array (field, n elements) of the same length. 22004 / 22023.';

ALTER FUNCTION cronbox.assert_run_ids(bigint[], text, integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.assert_run_ids(bigint[], text, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
