-- cronbox.json_too_deep(value): true when a JSON value is nested deeper than cronbox accepts
-- (2,048 levels: the value itself is the first, each array or object inside it one more;
-- jsonpath counts from 0, so an item at its level 2048 is the 2,049th).
-- PostgreSQL stores jsonb nested up to ~14,500 levels (its parser's stack), but copying such a
-- value into a message (jsonb_build_object in a claim) needs more stack than parsing it did:
-- a payload within ~200 levels of the parser's limit was stored, then failed every claim that
-- reached its row with "stack depth limit exceeded". 2,048 leaves a margin of ~7x at the default
-- max_stack_depth (2 MB) and is twice orjson's 1,024, so what the worker kit refuses as too deep
-- is still delivered and failed with its reason (docs/relay.md, "Poison data").
-- The path walk stops at the first item found at that level, and descends no further: a value
-- as deep as the parser allows is answered without running out of stack. Called at the door
-- only (schedule, update, trigger, the reports' results, process info), never per row of a
-- batch path.
CREATE OR REPLACE FUNCTION cronbox.json_too_deep(value jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN jsonb_path_exists(value, 'strict $.**{2048}');

COMMENT ON FUNCTION cronbox.json_too_deep(jsonb) IS
'Internal: true when a JSON value is nested more than 2,048 levels deep (payloads, results and process info are refused past it).';

ALTER FUNCTION cronbox.json_too_deep(jsonb) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.json_too_deep(jsonb) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
