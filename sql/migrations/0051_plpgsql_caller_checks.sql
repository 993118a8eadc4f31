-- 0051: the row-security helpers became PL/pgSQL (their pg_roles query was planned anew on
-- every call as LANGUAGE sql functions with a SET clause: ~0.2-0.4 ms each, a few dozen per
-- dispatch or ack batch). Their bodies now live in sql/functions/helper/caller*.sql, re-applied
-- by every migrate: a function's history is its one file, and migrations only create tables.
-- A database migrated by older code ran the old body of this migration; the function files
-- replace it with the same definition in the same migrate. Nothing left to do here.
SELECT 1;
