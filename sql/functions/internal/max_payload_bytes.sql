-- cronbox.max_payload_bytes(): the largest a schedule's or trigger's payload accepted, in bytes of its JSON text.
-- Default 65536; the operator sets it with the setting cronbox.max_payload_bytes, e.g.
-- ALTER DATABASE app SET cronbox.max_payload_bytes = '262144'. A session may set it too, so
-- it is clamped to 1 KiB .. 16 MiB whatever is set: no caller can lift the ceiling. A value
-- that is not a whole number falls back to the default. STABLE, reads no table.
CREATE OR REPLACE FUNCTION cronbox.max_payload_bytes() RETURNS integer
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_set text := current_setting('cronbox.max_payload_bytes', true);
BEGIN
    IF v_set IS NULL OR v_set !~ '^[0-9]{1,9}$' THEN
        RETURN 65536;
    END IF;
    RETURN least(greatest(v_set::integer, 1024), 16777216);
END
$$;

COMMENT ON FUNCTION cronbox.max_payload_bytes() IS
'Internal: the size limit of a schedule''s or trigger''s payload in bytes of JSON text: setting cronbox.max_payload_bytes (default 65536), clamped to 1 KiB .. 16 MiB.';

ALTER FUNCTION cronbox.max_payload_bytes() OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.max_payload_bytes() FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
