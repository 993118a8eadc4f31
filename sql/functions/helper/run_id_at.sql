-- cronbox.run_id_at(ts): the smallest run id that cronbox.new_run_id() could draw at ts.
-- Used for partition bounds and to turn a time range into a run_id range. Pure arithmetic.
CREATE OR REPLACE FUNCTION cronbox.run_id_at(p_ts timestamptz) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT floor(extract(epoch FROM p_ts) * 1000)::bigint << 20
$$;

COMMENT ON FUNCTION cronbox.run_id_at(timestamp with time zone) IS
'The smallest run id drawn at the given time (epoch milliseconds << 20); partition bounds and time-range filters on cronbox.run use it.';

ALTER FUNCTION cronbox.run_id_at(timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.run_id_at(timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.run_id_at(timestamp with time zone) TO cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
