-- cronbox.run_id_time(run_id): when the run row was written, read back from its id
-- (cronbox.new_run_id(): epoch milliseconds << 20, the clock at the insert); the inverse of
-- cronbox.run_id_at to the millisecond. The run row keeps no separate creation time (migration
-- 0190). Pure arithmetic.
CREATE OR REPLACE FUNCTION cronbox.run_id_time(p_run_id bigint) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT to_timestamp((p_run_id >> 20) / 1000.0)
$$;

COMMENT ON FUNCTION cronbox.run_id_time(bigint) IS
'When the run with this id was written (its id encodes the clock at the insert, in milliseconds); the inverse of cronbox.run_id_at.';

ALTER FUNCTION cronbox.run_id_time(bigint) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.run_id_time(bigint) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.run_id_time(bigint) TO cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
