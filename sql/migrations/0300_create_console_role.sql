-- 0300: cronbox_web, the role the web console needs for itself: it may register, heartbeat and
-- deregister its own entry in cronbox.processes (kind 'console', the functions in
-- sql/functions/web/) and nothing else. What the console shows and does for its users comes
-- from the roles it SETs for each request (cronbox_admin, cronbox_reader, owners), not from
-- this one. Grant it to the console's login role: GRANT cronbox_web TO cronbox_console.

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'cronbox_web') THEN
        BEGIN
            CREATE ROLE cronbox_web NOLOGIN;
        EXCEPTION
            WHEN duplicate_object THEN NULL;  -- another database of this cluster migrating now
            WHEN insufficient_privilege THEN
                RAISE EXCEPTION 'roles: cannot create role cronbox_web (the migrating role needs CREATEROLE)'
                    USING ERRCODE = 'insufficient_privilege',
                          HINT = 'ask a superuser to run: CREATE ROLE cronbox_web NOLOGIN;';
        END;
    END IF;
END
$$;
GRANT USAGE ON SCHEMA cronbox TO cronbox_web;
