-- 0440: cronbox_runner, the role the report functions run as (complete_run, complete_runs,
-- fail_run, fail_runs and their bodies). Row-level security stays FORCEd on every table for
-- everything else; for this role each table gets one more permissive policy, USING (true),
-- which the planner folds with the others (true OR ...) into no check at all: no init plan,
-- no sub-plan on cronbox.job started per statement. The functions it owns enforce the owner
-- rule themselves, once per call (cronbox.caller_hidden_runs): a caller limited to its own
-- schedules sees and reports only its own runs, with the same answers as under the policies.
-- docs/architecture.md, "Row security on the report path".
--
-- cronbox_runner is NOLOGIN and a member of cronbox_owner (the tables' privileges; it is not
-- their owner, so FORCEd row security still applies to it and its policy is the one that
-- lets it through). Only the migrating role is made a member of it (to hand functions to it).

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'cronbox_runner') THEN
        BEGIN
            CREATE ROLE cronbox_runner NOLOGIN;
        EXCEPTION
            WHEN duplicate_object THEN NULL;  -- another database of this cluster migrating now
            WHEN insufficient_privilege THEN
                RAISE EXCEPTION 'roles: cannot create role cronbox_runner (the migrating role needs CREATEROLE)'
                    USING ERRCODE = 'insufficient_privilege',
                          HINT = 'ask a superuser to run: CREATE ROLE cronbox_runner NOLOGIN;';
        END;
    END IF;
    IF NOT pg_catalog.pg_has_role('cronbox_runner', 'cronbox_owner', 'MEMBER') THEN
        GRANT cronbox_owner TO cronbox_runner;
    END IF;
    IF NOT pg_catalog.pg_has_role(current_user, 'cronbox_runner', 'MEMBER') THEN
        EXECUTE format('GRANT cronbox_runner TO %I', current_user);
    END IF;
END
$$;

-- One policy per table under row security (all of them, so a report never starts a policy's
-- plan whichever table it touches). tests/test_ops_roles.py checks none is missing.
DO $$
DECLARE
    v_table regclass;
BEGIN
    FOR v_table IN
        SELECT c.oid::regclass FROM pg_catalog.pg_class c
        WHERE c.relnamespace = 'cronbox'::regnamespace AND c.relkind IN ('r', 'p') AND c.relrowsecurity
          AND NOT c.relispartition
        ORDER BY 1
    LOOP
        EXECUTE format('CREATE POLICY %I ON %s TO cronbox_runner USING (true) WITH CHECK (true)',
                       replace(v_table::text, 'cronbox.', '') || '_runner', v_table);
    END LOOP;
END
$$;
