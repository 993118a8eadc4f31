-- sql/grants.sql: who may do what. Applied last by `cronbox migrate`, in the same transaction
-- as the function and view files, every time they change, so it also covers functions and
-- views that were just (re)created: CREATE OR REPLACE FUNCTION resets SECURITY DEFINER, and
-- CREATE VIEW makes the migrating role the owner. Idempotent; the roles come from migration
-- 0040. Steps: everything is owned by cronbox_owner; PUBLIC gets nothing; tables are written
-- only by their owner; each function is classified BY NAME below and granted to its roles;
-- a function whose name fits no class fails the migrate, so none is born without a decision.
--
-- Classes:
--   manage   cronbox_admin + cronbox_user (row security limits a user to its own schedules)
--   admin    cronbox_admin only (settings that affect every schedule)
--   worker   cronbox_worker (and cronbox_process, a member of it)
--   process  cronbox_process: the poller's and relay's own calls
--   helper   every cronbox role: identity helpers that row-security policies call, pure
--            arithmetic (run_id_at)
--   internal nobody: called only from inside the functions above (which run as the owner)
-- manage/admin/worker/process functions become SECURITY DEFINER (they write tables nobody
-- else may write); all functions get SET search_path = pg_catalog, pg_temp.

DO $grants$
DECLARE
    c_manage   constant text := '^(schedule|unschedule|pause|resume|trigger|cancel|cancel_run'
                                 '|add_dependency|remove_dependency)$';
    c_admin    constant text := '^(set_queue_limit|remove_queue_limit|clear_queue_limit'
                                 '|drop_queue_limit|redrive.*)$';
    c_worker   constant text := '^(start_run|heartbeat|complete_runs?|fail_runs?|claim_runs)$';
    c_process  constant text := '^(claim_saturation|store_fires|quarantine_job|due_jobs|dispatch|dispatch_ahead|claim_outbox|ack_outbox'
                                 '|nack.*|reap.*|release_outbox|dead_letter.*'
                                 '|ensure_run_partitions|drop_run_partitions|run_retention'
                                 '|register_process|unregister_process|deregister_process'
                                 '|heartbeat_process|list_queues|release_holds|reconcile_queue_limits|touch_process|beat_process|process_heartbeat|reap_processes'
                                 '|metrics_.*)$';
    c_helper   constant text := '^(caller|caller_reads_all|caller_writes_all|run_id_at)$';
    c_internal constant text := '^(new_run_id|catchup_start|run_message|ready_priorities|withdraw_early_runs|normalize_cron|validate_.*|record_change'
                                 '|check_.*|assert_.*|notify_.*|enqueue_.*|compute_.*|next_.*|schedule_next_.*'
                                 '|finish_runs|find_dependency_cycle|release_job_holds|retry_backoff|lock_job)$';
    c_roles    constant text := 'cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process';
    v_obj record;
    v_class text;
    v_unknown text[] := ARRAY[]::text[];
    v_rls_only boolean;
BEGIN
    -- 1. One owner for everything, so SECURITY DEFINER functions and views run as a role that
    --    is neither superuser nor BYPASSRLS: row-level security (FORCEd) holds inside them.
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
        WHERE p.pronamespace = 'cronbox'::regnamespace AND p.proowner <> 'cronbox_owner'::regrole
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

    -- 4. Functions, by name.
    FOR v_obj IN
        SELECT p.oid::regprocedure AS sig, p.proname::text AS name, p.prokind
        FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'cronbox'::regnamespace
        ORDER BY p.proname
    LOOP
        v_class := CASE
            WHEN v_obj.name ~ c_manage THEN 'manage'
            WHEN v_obj.name ~ c_admin THEN 'admin'
            WHEN v_obj.name ~ c_worker THEN 'worker'
            WHEN v_obj.name ~ c_process THEN 'process'
            WHEN v_obj.name ~ c_helper THEN 'helper'
            WHEN v_obj.name ~ c_internal THEN 'internal'
        END;
        IF v_class IS NULL THEN
            v_unknown := v_unknown || v_obj.sig::text;
            CONTINUE;
        END IF;
        IF v_obj.prokind = 'a' THEN
            EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC, %s', v_obj.sig, c_roles);
            CONTINUE;
        END IF;
        EXECUTE format('REVOKE ALL ON ROUTINE %s FROM PUBLIC, %s', v_obj.sig, c_roles);
        EXECUTE format('ALTER ROUTINE %s %s SET search_path = pg_catalog, pg_temp', v_obj.sig,
                       CASE WHEN v_class IN ('manage', 'admin', 'worker', 'process')
                            THEN 'SECURITY DEFINER' ELSE 'SECURITY INVOKER' END);
        CONTINUE WHEN v_class = 'internal';
        EXECUTE format('GRANT EXECUTE ON ROUTINE %s TO %s', v_obj.sig, CASE v_class
            WHEN 'manage' THEN 'cronbox_admin, cronbox_user'
            WHEN 'admin' THEN 'cronbox_admin'
            WHEN 'worker' THEN 'cronbox_worker'
            WHEN 'process' THEN 'cronbox_process'
            ELSE c_roles END);
    END LOOP;
    IF cardinality(v_unknown) > 0 THEN
        RAISE EXCEPTION 'grants: no role class for function(s) %', array_to_string(v_unknown, ', ')
            USING ERRCODE = 'invalid_object_definition',
                  HINT = 'add each name to one class (manage, admin, worker, process, helper, internal) in sql/grants.sql';
    END IF;

    -- 5. Views: administrators and readers see all of them. cronbox_user gets only the views
    --    whose every table has row-level security, so it never sees other owners' rows; a
    --    function a view calls is executable by whoever may read the view.
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
    FOR v_obj IN
        SELECT DISTINCT d.refobjid::regprocedure AS sig
        FROM pg_catalog.pg_rewrite rw
        JOIN pg_catalog.pg_class v ON v.oid = rw.ev_class
        JOIN pg_catalog.pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = rw.oid
                                   AND d.refclassid = 'pg_proc'::regclass
        JOIN pg_catalog.pg_proc p ON p.oid = d.refobjid
        WHERE v.relnamespace = 'cronbox'::regnamespace AND v.relkind IN ('v', 'm')
          AND p.pronamespace = 'cronbox'::regnamespace
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO cronbox_admin, cronbox_reader, cronbox_user',
                       v_obj.sig);
    END LOOP;
END
$grants$;
