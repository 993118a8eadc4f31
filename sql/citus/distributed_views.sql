-- The views of a database whose hot tables are distributed (Citus layer migration 0356), read as
-- cronbox's owner: Citus reads a shard, and a local table joined with distributed ones, with the
-- privileges of the role querying the view (`permission denied for table job_<shard>` for every
-- role but a superuser). Each view listed is kept as cronbox.<v>_rows (its query, as
-- sql/views/<v>.sql made it) and cronbox.<v> becomes `SELECT * FROM
-- cronbox.read_view(NULL::cronbox.<v>_rows)` (same columns, comment and grants; the _rows view
-- granted to nobody). Run by the migrate after every run on such a database, after the grants:
-- a view file applied again makes the view anew (then it is wrapped again, its old _rows
-- dropped), and sql/grants.sql grants the views again (then the wrapper's grants are the _rows
-- view's again). On plain PostgreSQL, and on Citus before the hot tables are distributed, the
-- views are their own queries.
DO $$
DECLARE
    v text;
    g record;
BEGIN
    FOREACH v IN ARRAY ARRAY['schedules', 'runs', 'backfills', 'pools', 'run_minutes', 'calendars', 'dependencies',
                            'schedule_definitions', 'upcoming_fires', 'schedule_changes', 'queues'] LOOP
        IF pg_catalog.pg_get_viewdef(pg_catalog.format('cronbox.%I', v)::regclass) !~ 'read_view' THEN
            EXECUTE pg_catalog.format('DROP VIEW IF EXISTS cronbox.%I', v || '_rows');
            EXECUTE pg_catalog.format('ALTER VIEW cronbox.%I RENAME TO %I', v, v || '_rows');
            EXECUTE pg_catalog.format('CREATE VIEW cronbox.%I AS SELECT * FROM cronbox.read_view(NULL::cronbox.%I)',
                                      v, v || '_rows');
            EXECUTE pg_catalog.format('ALTER VIEW cronbox.%I OWNER TO cronbox_owner', v);
            EXECUTE pg_catalog.format('COMMENT ON VIEW cronbox.%I IS %L', v,
                                      pg_catalog.obj_description(pg_catalog.format('cronbox.%I', v || '_rows')::regclass, 'pg_class'));
        END IF;
        -- the wrapper: the grants the view's own query has (sql/grants.sql, the view's file);
        -- the query itself: nobody's but the owner's
        EXECUTE pg_catalog.format('REVOKE ALL ON cronbox.%I FROM PUBLIC', v);
        FOR g IN SELECT DISTINCT a.grantee::regrole AS grantee
                 FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
                 WHERE c.oid = pg_catalog.format('cronbox.%I', v || '_rows')::regclass
                   AND a.privilege_type = 'SELECT' AND a.grantee <> c.relowner AND a.grantee <> 0 LOOP
            EXECUTE pg_catalog.format('GRANT SELECT ON cronbox.%I TO %s', v, g.grantee);
            EXECUTE pg_catalog.format('REVOKE ALL ON cronbox.%I FROM %s', v || '_rows', g.grantee);
        END LOOP;
    END LOOP;
END
$$;
