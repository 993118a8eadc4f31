-- cronbox.drop_run_partitions(p_retention): drops whole daily partitions of
-- cronbox.run whose every row is older than now() - p_retention. Retention never deletes
-- row by row. Takes the same advisory lock as ensure_run_partitions. Returns the names dropped.
-- Thin wrapper: the body is cronbox.drop_run_partitions_at (internal/drop_run_partitions_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.drop_run_partitions(
    p_retention interval DEFAULT '30 days'::interval
) RETURNS SETOF text
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT * FROM cronbox.drop_run_partitions_at($1, now())
$$;

COMMENT ON FUNCTION cronbox.drop_run_partitions(interval) IS
'Drops the daily partitions of cronbox.run that lie wholly before now - retention (default 30 days), except a day with a run still in flight, and the late reports of the runs dropped. Returns the dropped partition names.';

ALTER FUNCTION cronbox.drop_run_partitions(interval) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.drop_run_partitions(interval) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.drop_run_partitions(interval) TO cronbox_process;
