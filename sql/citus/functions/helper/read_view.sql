-- cronbox.read_view(row) (Citus only, distributed tables): the rows of a view read as cronbox's
-- owner, for the views that read the distributed tables (sql/citus/distributed_views.sql: the
-- view cronbox.<v> is `SELECT * FROM cronbox.read_view(NULL::cronbox.<v>_rows)`, its query kept
-- as cronbox.<v>_rows). Citus reads a shard, and a local table joined with distributed ones,
-- with the privileges of the role querying the view, which may not read cronbox's tables; run
-- here as the owner, after carrying the caller to the worker nodes (cronbox.carry_caller), the
-- row-security policies still decide which rows the caller sees, as the view's own do on one
-- primary. Refused (42501) unless the row type is such a view's and the caller may read the view
-- itself. Costs the whole view: a filter on the view is applied to its rows, not pushed into its
-- query. A worker node down fails the read (every bucket is read) with the view named, 08006. No
-- locks.
CREATE OR REPLACE FUNCTION cronbox.read_view(p_row anyelement) RETURNS SETOF anyelement
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_rows regclass;
    v_view regclass;
BEGIN
    SELECT c.oid, pg_catalog.to_regclass('cronbox.' || pg_catalog.quote_ident(pg_catalog.left(c.relname, -5)))
      INTO v_rows, v_view
    FROM pg_catalog.pg_type t JOIN pg_catalog.pg_class c ON c.oid = t.typrelid
    WHERE t.oid = pg_catalog.pg_typeof(p_row) AND c.relnamespace = 'cronbox'::regnamespace
      AND c.relkind = 'v' AND c.relname LIKE '%\_rows';
    IF v_view IS NULL OR NOT pg_catalog.has_table_privilege(cronbox.caller(), v_view, 'SELECT') THEN
        RAISE EXCEPTION 'permission denied: cronbox.read_view reads only the views the caller may read'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    PERFORM cronbox.carry_caller();  -- the caller for the policies on the worker nodes
    BEGIN
        RETURN QUERY EXECUTE pg_catalog.format('SELECT * FROM %s', v_rows);
    EXCEPTION WHEN connection_exception THEN
        -- a worker node down: the view needs every bucket, the calls on one job do not
        RAISE EXCEPTION '% reads every bucket, and a worker node holding some of them is unreachable: %', v_view, SQLERRM
            USING ERRCODE = SQLSTATE,
                  HINT = 'The calls on one job (pause, resume, schedule) still work for the jobs whose bucket is on a node that is up; an administrator or a reader sees which node holds which bucket in cronbox.buckets.';
    WHEN active_sql_transaction THEN  -- another role's writes earlier in the transaction (25001)
        RAISE EXCEPTION '%', SQLERRM USING ERRCODE = SQLSTATE, HINT = cronbox.error_hint(SQLSTATE, SQLERRM, NULL);
    END;
END
$$;

COMMENT ON FUNCTION cronbox.read_view(anyelement) IS
'Citus: the rows of a view over the distributed tables (cronbox.<v>_rows), read as cronbox''s owner with the caller carried to the worker nodes, so that row security still filters them; only for a caller who may read the view cronbox.<v>.';

ALTER FUNCTION cronbox.read_view(anyelement) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.read_view(anyelement) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process, cronbox_capacity;
GRANT EXECUTE ON FUNCTION cronbox.read_view(anyelement) TO cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process, cronbox_capacity;
