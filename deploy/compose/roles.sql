-- The login roles of the compose stack, each allowed only what its process needs. Run once by
-- the postgres image at first start, as its superuser (docker-entrypoint-initdb.d); nothing
-- else ever logs in as a superuser. The passwords are demo values: replace them (and the
-- DSNs in docker-compose.yml) for anything but a demo. The same lines, for any deployment:
-- docs/operations.md, "Roles and grants".

-- `cronbox migrate`: creates and owns the schema (it becomes a member of cronbox_owner).
CREATE ROLE cronbox_migrator LOGIN PASSWORD 'migrator-demo' CREATEROLE;
GRANT CREATE ON DATABASE cronbox TO cronbox_migrator;

-- The cronbox roles (`cronbox migrate` creates the missing ones; made here so that they can be
-- granted before the first migrate).
CREATE ROLE cronbox_owner NOLOGIN;
CREATE ROLE cronbox_admin NOLOGIN;
CREATE ROLE cronbox_user NOLOGIN;
CREATE ROLE cronbox_worker NOLOGIN;
CREATE ROLE cronbox_reader NOLOGIN;
CREATE ROLE cronbox_process NOLOGIN;
CREATE ROLE cronbox_web NOLOGIN;
-- The schema and every object in it end up owned by cronbox_owner, which PostgreSQL allows only
-- to a role with CREATE on the database.
GRANT CREATE ON DATABASE cronbox TO cronbox_owner;

-- The processes.
CREATE ROLE cronbox_poller LOGIN PASSWORD 'poller-demo';
CREATE ROLE cronbox_relay LOGIN PASSWORD 'relay-demo';
GRANT cronbox_process TO cronbox_poller, cronbox_relay;

-- A worker: start/heartbeat/complete/fail/claim only.
CREATE ROLE cronbox_demo_worker LOGIN PASSWORD 'worker-demo';
GRANT cronbox_worker TO cronbox_demo_worker;

-- The web console: each console login acts as the database role it is mapped to (SET ROLE),
-- so the console's own role may only become those, and cronbox_web, under which it registers
-- itself in cronbox.processes (and may do nothing else).
CREATE ROLE cronbox_console LOGIN PASSWORD 'console-demo' NOINHERIT;
GRANT cronbox_admin, cronbox_reader, cronbox_web TO cronbox_console;
