-- 0151: the web console's schedule search (case-insensitive substring of the name) served by
-- a trigram index, so a search reads the matching names, not every schedule's (0.4-0.5 s at
-- 100,000 schedules before).
--
-- Why a side table and not an index on cronbox.job: job has FORCEd row-level security, and
-- PostgreSQL never evaluates a non-leakproof condition (ILIKE is not leakproof) ahead of the
-- policy, so an index on job.name can serve `=` and ORDER BY but never ILIKE: the search
-- would stay a scan. cronbox.job_name_search has no row security; only the SECURITY DEFINER
-- function cronbox.search_schedules reads it, and it joins every match back to cronbox.job,
-- so the caller's row security still decides which names come out. The side table also
-- keeps the trigram index off cronbox.job, whose updates (saturation) must stay cheap.
-- Kept in step by cronbox.sync_schedule_names (the poller's maintenance, every minute);
-- cronbox.search_schedules also reads the schedules created since the last sync directly.
--
-- pg_trgm ships with PostgreSQL (contrib: in Debian's postgresql-15 package and the official
-- images) and is a trusted extension: the migrating role needs only CREATE on the database,
-- which it has (it made schema cronbox). It goes into its own schema, cronbox_ext, unless it
-- is installed already (then it is used where it is), so schema cronbox holds only cronbox's
-- own functions.
CREATE TABLE cronbox.job_name_search (
    job_id  bigint PRIMARY KEY,
    name    text NOT NULL
);
CREATE INDEX job_name_search_name_idx ON cronbox.job_name_search (name);

DO $$
DECLARE
    v_schema name;
BEGIN
    SELECT n.nspname INTO v_schema
    FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
    WHERE e.extname = 'pg_trgm';
    IF v_schema IS NULL THEN
        BEGIN
            CREATE SCHEMA IF NOT EXISTS cronbox_ext;
            CREATE EXTENSION pg_trgm SCHEMA cronbox_ext;
        EXCEPTION WHEN undefined_file OR feature_not_supported OR insufficient_privilege THEN
            RAISE EXCEPTION 'migration 0151: cannot create extension pg_trgm: %', SQLERRM
                USING ERRCODE = 'feature_not_supported',
                      HINT = 'install PostgreSQL''s contrib extensions (Debian: part of postgresql-15), or have a superuser run: CREATE EXTENSION pg_trgm;';
        END;
        v_schema := 'cronbox_ext';
    END IF;
    EXECUTE format('CREATE INDEX job_name_search_trgm_idx ON cronbox.job_name_search USING gin (name %I.gin_trgm_ops)',
                   v_schema);
END
$$;

INSERT INTO cronbox.job_name_search (job_id, name) SELECT j.job_id, j.name FROM cronbox.job j;
