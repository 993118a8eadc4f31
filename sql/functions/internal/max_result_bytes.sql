-- cronbox.max_result_bytes(): the largest a run's result (complete_run, complete_runs) accepted, in bytes of its JSON text.
-- Default 1048576; the operator sets it with the setting cronbox.max_result_bytes, e.g.
-- ALTER DATABASE app SET cronbox.max_result_bytes = '262144'. A session may set it too, so
-- it is clamped to 1 KiB .. 16 MiB whatever is set: no caller can lift the ceiling. A value
-- that is not a whole number falls back to the default. STABLE, reads no table.
CREATE OR REPLACE FUNCTION cronbox.max_result_bytes() RETURNS integer
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_set text := current_setting('cronbox.max_result_bytes', true);
BEGIN
    IF v_set IS NULL OR v_set !~ '^[0-9]{1,9}$' THEN
        RETURN 1048576;
    END IF;
    RETURN least(greatest(v_set::integer, 1024), 16777216);
END
$$;

COMMENT ON FUNCTION cronbox.max_result_bytes() IS
'Internal: the size limit of a run''s result (complete_run, complete_runs) in bytes of JSON text: setting cronbox.max_result_bytes (default 1048576), clamped to 1 KiB .. 16 MiB.';

ALTER FUNCTION cronbox.max_result_bytes() OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.max_result_bytes() FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
