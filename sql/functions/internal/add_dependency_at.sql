-- Internal: the body of cronbox.add_dependency, with the time as its last parameter p_now. The public
-- cronbox.add_dependency passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.add_dependency_at(name, upstream, within, wait_timeout, job, p_now): gate a scheduled
-- job on an upstream job. The job is `name`, or `job` (its old spelling, kept for a release):
-- exactly one of the two (neither: 22004, both: 22023). A due fire of the job waits until
-- `upstream` has a success no older than `within` (NULL: since this job's previous fire);
-- past `wait_timeout` (NULL: forever) the fire fails with a clear error and a notification. Calling it again updates within and
-- wait_timeout. Rejects a cycle (named in the error, SQLSTATE 22023) under a transaction
-- advisory lock that serialises dependency changes. Records the change in the change log.
CREATE OR REPLACE FUNCTION cronbox.add_dependency_at(
    name text DEFAULT NULL,
    upstream text DEFAULT NULL,
    within interval DEFAULT NULL,
    wait_timeout interval DEFAULT NULL,
    job text DEFAULT NULL,
    p_now timestamptz DEFAULT now()
) RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job_id bigint;
    v_up_id bigint;
    v_cycle text;
    v_bucket integer;  -- the gated job's
    v_up_bucket integer;
    -- the job's name, and the parameter the caller gave it in (messages name that one)
    v_name text := coalesce(add_dependency_at.name, add_dependency_at.job);
    v_field text := CASE WHEN add_dependency_at.name IS NULL AND add_dependency_at.job IS NOT NULL
                         THEN 'job' ELSE 'name' END;
BEGIN
    IF add_dependency_at.name IS NOT NULL AND add_dependency_at.job IS NOT NULL THEN
        RAISE EXCEPTION 'job: give the job as name => (or job =>, its old spelling), not both'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM cronbox.assert_job_name(v_field, v_name);
    PERFORM cronbox.assert_job_name('upstream', add_dependency_at.upstream);
    IF add_dependency_at.within IS NOT NULL AND add_dependency_at.within <= interval '0' THEN
        RAISE EXCEPTION 'within: must be a positive interval, got %', add_dependency_at.within
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF add_dependency_at.wait_timeout IS NOT NULL AND add_dependency_at.wait_timeout <= interval '0' THEN
        RAISE EXCEPTION 'wait_timeout: must be a positive interval, got %', add_dependency_at.wait_timeout
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM cronbox.assert_at_most('within', add_dependency_at.within, interval '366 days');
    PERFORM cronbox.assert_at_most('wait_timeout', add_dependency_at.wait_timeout, interval '366 days');
    PERFORM pg_advisory_xact_lock(hashtext('cronbox.dependencies'));
    -- the job's lock (before the row's key-share lock the new edge takes): dispatch decides
    -- on its gates, and its early runs are withdrawn below, under it
    v_bucket := cronbox.job_bucket(v_name);
    v_job_id := cronbox.lock_job_named(v_name, v_bucket);
    IF v_job_id IS NULL THEN
        RAISE EXCEPTION '%: no schedule named %', v_field, quote_literal(v_name)
            USING ERRCODE = 'no_data_found';
    END IF;
    v_up_bucket := cronbox.job_bucket(add_dependency_at.upstream);  -- the upstream's, its name's
    SELECT j.job_id INTO v_up_id FROM cronbox.job j WHERE j.bucket = v_up_bucket AND j.name = add_dependency_at.upstream;
    IF v_up_id IS NULL THEN
        RAISE EXCEPTION 'upstream: no schedule named %', quote_literal(add_dependency_at.upstream)
            USING ERRCODE = 'no_data_found';
    END IF;
    IF v_up_id = v_job_id THEN
        RAISE EXCEPTION 'upstream: % cannot wait for itself', quote_literal(v_name)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_cycle := cronbox.find_dependency_cycle(v_job_id, ARRAY[v_up_id]);
    IF v_cycle IS NOT NULL THEN
        RAISE EXCEPTION 'upstream: % waiting for % would make a cycle: %',
            quote_literal(v_name), quote_literal(add_dependency_at.upstream), v_cycle
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- A gate reads the job's last fire and the upstream's last success while deciding: their
    -- statistics folded off the hot path are folded now (cronbox.job_stat_folded).
    PERFORM cronbox.fold_job_stats_of(ARRAY[v_job_id], v_bucket);
    PERFORM cronbox.fold_job_stats_of(ARRAY[v_up_id], v_up_bucket);
    -- with the gated job's bucket (a finished upstream releases its fires there)
    INSERT INTO cronbox.job_dependency AS d (job_id, upstream_id, within, wait_timeout, created_at, bucket)
    VALUES (v_job_id, v_up_id, add_dependency_at.within, add_dependency_at.wait_timeout, p_now,
            v_bucket)
    ON CONFLICT ON CONSTRAINT job_dependency_pkey
    DO UPDATE SET within = excluded.within, wait_timeout = excluded.wait_timeout, bucket = excluded.bucket;
    -- Early dispatch (on by default) decided the job's next fires without this gate: the
    -- runs no relay holds yet are withdrawn (under the job's lock, taken above).
    PERFORM cronbox.withdraw_early_runs(v_job_id, 'cancelled: dependency added before its fire time', p_now, v_bucket);
    PERFORM cronbox.record_change(v_job_id, v_name, 'updated',
        format('waits for %s (within %s, wait_timeout %s)', add_dependency_at.upstream,
               coalesce(add_dependency_at.within::text, 'since previous fire'),
               coalesce(add_dependency_at.wait_timeout::text, 'none')), p_now);
END
$$;

COMMENT ON FUNCTION cronbox.add_dependency_at(text, text, interval, interval, text, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.add_dependency(text, text, interval, interval, text) with the time as p_now; tests use it to fix the clock. Gates a job (name, or job: its old spelling) on upstream: a due fire waits for an upstream success no older than within (NULL: since the job''s previous fire), failing with a notification after wait_timeout. Rejects cycles, naming them.';

ALTER FUNCTION cronbox.add_dependency_at(text, text, interval, interval, text, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.add_dependency_at(text, text, interval, interval, text, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
