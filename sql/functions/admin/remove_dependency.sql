-- cronbox.remove_dependency(job, upstream): removes a gate added with add_dependency; fires
-- of job waiting on it are released at once. Takes the dependency advisory lock. Returns
-- whether a gate was removed; raises 22023 for an unknown schedule name.
-- Thin wrapper: the body is cronbox.remove_dependency_at (internal/remove_dependency_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.remove_dependency(
    job text,
    upstream text
) RETURNS boolean
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT cronbox.remove_dependency_at($1, $2, now())
$$;

COMMENT ON FUNCTION cronbox.remove_dependency(text, text) IS
'Removes the gate of job on upstream (add_dependency) and releases fires waiting on it. Returns whether a gate was removed.';

ALTER FUNCTION cronbox.remove_dependency(text, text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.remove_dependency(text, text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.remove_dependency(text, text) TO cronbox_admin, cronbox_user;
