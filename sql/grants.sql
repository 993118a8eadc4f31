-- sql/grants.sql: ownership and the grants that belong to no single function. Applied last by
-- `cronbox migrate`, in the same transaction as the function and view files, every time they
-- change. Idempotent; the roles come from migration 0040. Steps: everything is owned by
-- cronbox_owner; PUBLIC gets nothing on the schema; tables are read and written only by their
-- owner (through the functions); views are granted to the roles that may read them. Functions
-- are NOT granted here: each function's file states its SECURITY DEFINER, pinned search_path,
-- REVOKE and GRANT lines, and the folder it lives in says who may call it:
--   sql/functions/admin/    cronbox_admin (+ cronbox_user where row security limits a user to
--                           its own schedules; set_queue_limit and redrive are admin only)
--   sql/functions/worker/   cronbox_worker (and cronbox_process, a member of it)
--   sql/functions/process/  cronbox_process: the poller's and relay's own calls
--   sql/functions/web/      cronbox_web: the web console's own entry in cronbox.processes
--   sql/functions/helper/   every cronbox role: identity helpers the row-security policies call,
--                           pure arithmetic (run_id_at)
--   sql/functions/internal/ nobody: called only from inside the functions above (which run as
--                           the owner); the `_at` bodies that take the time live here
-- Step 4 fails the migrate if any function lacks that explicit decision.

DO $grants$
DECLARE
    c_roles    constant text := 'cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process';
    v_obj record;
    v_unknown text[] := ARRAY[]::text[];  -- functions without an explicit decision
    v_rls_only boolean;
BEGIN
    -- 1. One owner for everything, so SECURITY DEFINER functions and views run as a role that
    --    is neither superuser nor BYPASSRLS: row-level security (FORCEd) holds inside them.
    --    The report functions (complete_run(s), fail_run(s), start_run, heartbeat, their bodies)
    --    and the batch paths (dispatch, claim_outbox, ack_outbox, claim_runs, their bodies,
    --    fold_job_stats) run as cronbox_runner, which a policy of its own lets through: they
    --    apply the owner rule themselves (docs/architecture.md, "Row security on the report
    --    path", "Row security on the batch paths").
    IF (SELECT n.nspowner::regrole::text FROM pg_catalog.pg_namespace n WHERE n.nspname = 'cronbox')
       <> 'cronbox_owner' THEN
        ALTER SCHEMA cronbox OWNER TO cronbox_owner;
    END IF;
    FOR v_obj IN
        SELECT c.oid::regclass AS name, c.relkind
        FROM pg_catalog.pg_class c
        WHERE c.relnamespace = 'cronbox'::regnamespace
          AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
          AND c.relowner <> 'cronbox_owner'::regrole
          -- identity/serial sequences follow their table
          AND NOT (c.relkind = 'S' AND EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
                          WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
                            AND d.deptype IN ('a', 'i') AND d.refclassid = 'pg_class'::regclass))
    LOOP
        EXECUTE format('ALTER %s %s OWNER TO cronbox_owner',
                       CASE v_obj.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW'
                                          WHEN 'S' THEN 'SEQUENCE' WHEN 'f' THEN 'FOREIGN TABLE'
                                          ELSE 'TABLE' END,
                       v_obj.name);
    END LOOP;
    FOR v_obj IN
        SELECT p.oid::regprocedure AS sig, p.prokind
        FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'cronbox'::regnamespace
          -- the report functions and the batch paths run as cronbox_runner (migration 0440): their files say so
          AND p.proowner NOT IN ('cronbox_owner'::regrole, 'cronbox_runner'::regrole)
    LOOP
        EXECUTE format('ALTER %s %s OWNER TO cronbox_owner',
                       CASE v_obj.prokind WHEN 'a' THEN 'AGGREGATE' ELSE 'ROUTINE' END, v_obj.sig);
    END LOOP;
    -- Free-standing types (composite, enum, domain); a table's row type follows its table.
    FOR v_obj IN
        SELECT t.oid::regtype AS name
        FROM pg_catalog.pg_type t
        LEFT JOIN pg_catalog.pg_class c ON c.oid = t.typrelid
        WHERE t.typnamespace = 'cronbox'::regnamespace AND t.typowner <> 'cronbox_owner'::regrole
          AND t.typtype IN ('c', 'e', 'd') AND (c.oid IS NULL OR c.relkind = 'c')
    LOOP
        EXECUTE format('ALTER TYPE %s OWNER TO cronbox_owner', v_obj.name);
    END LOOP;

    -- 2. The schema: usage for the cronbox roles only.
    REVOKE ALL ON SCHEMA cronbox FROM PUBLIC;
    EXECUTE 'GRANT USAGE ON SCHEMA cronbox TO ' || c_roles;

    -- 3. Tables, views and sequences: nobody but the owner; views are granted again in 5.
    EXECUTE 'REVOKE ALL ON ALL TABLES IN SCHEMA cronbox FROM PUBLIC, ' || c_roles;
    EXECUTE 'REVOKE ALL ON ALL SEQUENCES IN SCHEMA cronbox FROM PUBLIC, ' || c_roles;

    -- 4. Functions: each file states its own SECURITY DEFINER, search_path, REVOKE and GRANT
    --    lines (sql/functions/<who may call>/<name>.sql). Here only a check that none was born
    --    without a decision: every function has an explicit ACL (REVOKE ... FROM PUBLIC ran),
    --    PUBLIC may not execute it, its search_path is pinned, and no `_at` function (the
    --    internal bodies that take the time) is executable by any cronbox role.
    FOR v_obj IN
        SELECT p.oid::regprocedure::text AS sig,
               CASE WHEN p.proacl IS NULL THEN 'no REVOKE ... FROM PUBLIC (default: PUBLIC may execute)'
                    WHEN pg_catalog.has_function_privilege('public', p.oid, 'EXECUTE') THEN 'PUBLIC may execute'
                    -- unpinned only for internal LANGUAGE sql helpers kept inlinable (a SET
                    -- clause prevents inlining); their bodies qualify every name
                    WHEN NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (p.proconfig), false)
                         AND (p.prosecdef OR p.prolang <> (SELECT l.oid FROM pg_catalog.pg_language l WHERE l.lanname = 'sql') OR EXISTS (
                            SELECT 1 FROM unnest(ARRAY['cronbox_admin', 'cronbox_user', 'cronbox_worker',
                                                       'cronbox_reader', 'cronbox_process']) AS r(role)
                            WHERE pg_catalog.has_function_privilege(r.role, p.oid, 'EXECUTE')))
                        THEN 'search_path not pinned to pg_catalog, pg_temp'
                    WHEN p.proname ~ '_at$' AND p.proname <> 'run_id_at' AND EXISTS (
                        SELECT 1 FROM unnest(ARRAY['cronbox_admin', 'cronbox_user', 'cronbox_worker',
                                                   'cronbox_reader', 'cronbox_process']) AS r(role)
                        WHERE pg_catalog.has_function_privilege(r.role, p.oid, 'EXECUTE'))
                        THEN 'internal _at function executable by a cronbox role'
               END AS problem
        FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'cronbox'::regnamespace AND p.prokind IN ('f', 'p')
        ORDER BY 1
    LOOP
        IF v_obj.problem IS NOT NULL THEN
            v_unknown := v_unknown || (v_obj.sig || ': ' || v_obj.problem);
        END IF;
    END LOOP;
    IF cardinality(v_unknown) > 0 THEN
        RAISE EXCEPTION 'grants: function(s) without an explicit decision: %', array_to_string(v_unknown, '; ')
            USING ERRCODE = 'invalid_object_definition',
                  HINT = 'state SECURITY DEFINER/INVOKER, SET search_path = pg_catalog, pg_temp, REVOKE ALL ... FROM PUBLIC and the GRANT EXECUTE lines in the function''s own file';
    END IF;

    -- 5. Views: administrators and readers see all of them. cronbox_user gets only the views
    --    whose every table has row-level security, so it never sees other owners' rows. (A
    --    function a view calls must be a helper/ function, executable by every cronbox role.)
    FOR v_obj IN
        SELECT c.oid::regclass AS name, c.oid
        FROM pg_catalog.pg_class c
        WHERE c.relnamespace = 'cronbox'::regnamespace AND c.relkind IN ('v', 'm')
    LOOP
        WITH RECURSIVE used(oid, relkind, rls) AS (
            SELECT v_obj.oid, 'v'::"char", true
            UNION
            SELECT t.oid, t.relkind, t.relrowsecurity AND t.relforcerowsecurity
            FROM used u
            JOIN pg_catalog.pg_rewrite rw ON rw.ev_class = u.oid
            JOIN pg_catalog.pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = rw.oid
                                       AND d.refclassid = 'pg_class'::regclass
            JOIN pg_catalog.pg_class t ON t.oid = d.refobjid AND t.oid <> u.oid
            WHERE u.relkind IN ('v', 'm')
        )
        SELECT bool_and(u.rls) INTO v_rls_only FROM used u WHERE u.relkind NOT IN ('v', 'm');
        EXECUTE format('GRANT SELECT ON %s TO cronbox_admin, cronbox_reader%s', v_obj.name,
                       CASE WHEN coalesce(v_rls_only, true) THEN ', cronbox_user' ELSE '' END);
    END LOOP;
END
$grants$;
