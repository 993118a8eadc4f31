-- cronbox.remove_dependency(name, upstream, job): removes a gate added with add_dependency;
-- fires of the job waiting on it are released at once. The job is `name`; `job =>` (its old
-- spelling) still works for a release: exactly one of the two. Takes the dependency advisory
-- lock. Returns whether a gate was removed; raises P0002 for an unknown job name.
-- Thin wrapper: the body is cronbox.remove_dependency_at (internal/remove_dependency_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.remove_dependency(
    name text DEFAULT NULL::text,
    upstream text DEFAULT NULL::text,
    job text DEFAULT NULL::text
) RETURNS boolean
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT cronbox.remove_dependency_at($1, $2, $3, now())
$$;

COMMENT ON FUNCTION cronbox.remove_dependency(text, text, text) IS
'Removes the gate of the job name on upstream (add_dependency) and releases fires waiting on it. Returns whether a gate was removed. job => is the old spelling of name => (kept for a release; give one of them).';

ALTER FUNCTION cronbox.remove_dependency(text, text, text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.remove_dependency(text, text, text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.remove_dependency(text, text, text) TO cronbox_admin, cronbox_user;
