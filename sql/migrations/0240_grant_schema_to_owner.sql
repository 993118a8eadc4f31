-- 0240: cronbox_owner may create in schema cronbox before the function files are applied, so
-- that a migrator that is not a superuser can hand each function to cronbox_owner (ALTER
-- FUNCTION ... OWNER TO needs the new owner to have CREATE on the schema). sql/grants.sql then
-- makes cronbox_owner the schema's owner, which PostgreSQL allows when cronbox_owner has CREATE
-- on the database (docs/operations.md, "Roles and grants").
GRANT USAGE, CREATE ON SCHEMA cronbox TO cronbox_owner;
