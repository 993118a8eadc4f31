-- cronbox.clip_text(value, max): value cut to at most max characters, with a marker saying
-- how much was cut, so that a worker's failure report is never refused for its size (it is
-- kept, shortened) and never floods notifications or status output. NULL stays NULL.
-- Pure: no reads, no locks.
CREATE OR REPLACE FUNCTION cronbox.clip_text(p_value text, p_max integer) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN length(p_value) <= p_max THEN p_value
                ELSE left(p_value, p_max - 60) || ' ... [truncated by cronbox: '
                     || length(p_value) || ' characters in all]' END
$$;

COMMENT ON FUNCTION cronbox.clip_text(text,integer) IS
'Internal: text cut to at most max characters with a "[truncated by cronbox: N characters in all]" marker (worker error texts).';

ALTER FUNCTION cronbox.clip_text(text,integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.clip_text(text,integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
