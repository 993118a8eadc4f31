-- Internal: the body of cronbox.remove_dependency, with the time as its last parameter p_now. The public
-- cronbox.remove_dependency passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.remove_dependency_at(name, upstream, job, p_now): removes a gate added with
-- add_dependency; fires of the job waiting on it are released at once. The job is `name`, or
-- `job` (its old spelling): exactly one. Takes the dependency advisory lock, then the job's lock
-- (cronbox.lock_job_named). Returns whether a
-- gate was removed; raises P0002 for an unknown job name.
CREATE OR REPLACE FUNCTION cronbox.remove_dependency_at(
    name text DEFAULT NULL,
    upstream text DEFAULT NULL,
    job text DEFAULT NULL,
    p_now timestamptz DEFAULT now()
) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job_id bigint;
    v_up_id bigint;
    v_up_bucket integer;
    v_bucket integer;
    v_name text := coalesce(remove_dependency_at.name, remove_dependency_at.job);
    v_field text := CASE WHEN remove_dependency_at.name IS NULL AND remove_dependency_at.job IS NOT NULL
                         THEN 'job' ELSE 'name' END;
BEGIN
    IF remove_dependency_at.name IS NOT NULL AND remove_dependency_at.job IS NOT NULL THEN
        RAISE EXCEPTION 'job: give the job as name => (or job =>, its old spelling), not both'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM cronbox.assert_job_name(v_field, v_name);
    PERFORM cronbox.assert_job_name('upstream', remove_dependency_at.upstream);
    PERFORM pg_advisory_xact_lock(hashtext('cronbox.dependencies'));
    -- the job's lock (as add_dependency): dispatch decides on its gates under it, so a fire it
    -- holds for this gate is held before this release or decided after the gate is gone
    v_bucket := cronbox.job_bucket(v_name);  -- the job's: its futures' statements in it
    v_job_id := cronbox.lock_job_named(v_name, v_bucket);
    IF v_job_id IS NULL THEN
        RAISE EXCEPTION '%: no schedule named %', v_field, quote_literal(v_name)
            USING ERRCODE = 'no_data_found';
    END IF;
    -- the upstream's id, read in the bucket its name gives, then the edge by key (on Citus the
    -- edges are a reference table, the jobs distributed: no statement joins the two)
    v_up_bucket := cronbox.job_bucket(remove_dependency_at.upstream);
    SELECT u.job_id INTO v_up_id FROM cronbox.job u
    WHERE u.bucket = v_up_bucket AND u.name = remove_dependency_at.upstream;
    DELETE FROM cronbox.job_dependency d WHERE d.job_id = v_job_id AND d.upstream_id = v_up_id;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM cronbox.record_change(v_job_id, v_name, 'updated',
        format('no longer waits for %s', remove_dependency_at.upstream), p_now);
    PERFORM cronbox.release_futures(ARRAY(
        SELECT f.future_id FROM cronbox.job_future f
        WHERE f.bucket = v_bucket AND f.job_id = v_job_id AND f.hold = 'dependency'), ARRAY[v_bucket]);
    RETURN true;
END
$$;

COMMENT ON FUNCTION cronbox.remove_dependency_at(text, text, text, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.remove_dependency(text, text, text) with the time as p_now; tests use it to fix the clock. Removes the gate of the job name (or job, its old spelling) on upstream (add_dependency) and releases fires waiting on it. Returns whether a gate was removed.';

ALTER FUNCTION cronbox.remove_dependency_at(text, text, text, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.remove_dependency_at(text, text, text, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
