-- 0356 (Citus only, applied by `cronbox migrate --citus --distribute`, never without the option;
-- once applied, every later migrate keeps it): the hot tables distributed by the bucket of the
-- job, colocated with cronbox.bucket_shard, so a bucket's rows of every table are on one node.
-- In order, one transaction: (1) every job made before the buckets (bucket 0) moved into its
-- name's bucket with every row of it, the pending statistics folded first (a change row names
-- jobs of one bucket); (2) keys and foreign keys rebuilt with the bucket first (Citus enforces a
-- key only with the distribution column in it; names stay unique: a name gives its bucket);
-- foreign keys that Citus cannot keep (from a reference or local table to a distributed one)
-- dropped: the functions that delete jobs delete those rows; (3) the row-security policies
-- that hold subqueries replaced by plain function calls (Citus refuses subqueries in policies):
-- a job's owner checked by a plain call; elsewhere only the callers that read or write every
-- schedule's rows. Not met: evaluated on the worker nodes, inside the SECURITY DEFINER
-- functions, cronbox.caller() is their owner there, so owner isolation does not hold through
-- the functions (docs/citus.md, "Distributing the hot tables"); (4) the tables distributed,
-- the small shared ones made reference tables.
-- The hot functions are planned with their bucket bound (plan_cache_mode), set by the migrate
-- after every run (sql/citus/distributed_plans.sql): a function file applied again resets it.
SET LOCAL citus.multi_shard_modify_mode TO 'sequential';

-- (1) jobs made before the buckets, into their name's bucket
DO $$
BEGIN
    WHILE cronbox.fold_job_stats(100000) > 0 LOOP
    END LOOP;
END
$$;
UPDATE cronbox.job j SET bucket = cronbox.bucket_of(j.name) WHERE j.bucket <> cronbox.bucket_of(j.name);
UPDATE cronbox.job_fire x SET bucket = j.bucket FROM cronbox.job j WHERE j.job_id = x.job_id AND x.bucket <> j.bucket;
UPDATE cronbox.job_stat x SET bucket = j.bucket FROM cronbox.job j WHERE j.job_id = x.job_id AND x.bucket <> j.bucket;
UPDATE cronbox.job_future x SET bucket = j.bucket FROM cronbox.job j WHERE j.job_id = x.job_id AND x.bucket <> j.bucket;
UPDATE cronbox.backfill x SET bucket = j.bucket FROM cronbox.job j WHERE j.job_id = x.job_id AND x.bucket <> j.bucket;
UPDATE cronbox.outbox x SET bucket = j.bucket FROM cronbox.job j WHERE j.job_id = x.job_id AND x.bucket <> j.bucket;
UPDATE cronbox.run x SET bucket = j.bucket FROM cronbox.job j WHERE j.job_id = x.job_id AND x.bucket <> j.bucket;
UPDATE cronbox.run_late_report x SET bucket = r.bucket FROM cronbox.run r WHERE r.run_id = x.run_id AND x.bucket <> r.bucket;
UPDATE cronbox.job_after_edge x SET bucket = j.bucket FROM cronbox.job j WHERE j.job_id = x.job_id AND x.bucket <> j.bucket;
UPDATE cronbox.job_dependency x SET bucket = j.bucket FROM cronbox.job j WHERE j.job_id = x.job_id AND x.bucket IS DISTINCT FROM j.bucket;

-- (2) keys with the bucket first; the foreign keys of the tables involved dropped, then the
-- ones between colocated tables made again on (bucket, job_id)
DO $$
DECLARE
    c record;
    v_hot regclass[] := ARRAY['cronbox.job', 'cronbox.job_future', 'cronbox.job_stat', 'cronbox.job_fire',
                              'cronbox.backfill', 'cronbox.outbox', 'cronbox.job_stat_change', 'cronbox.run',
                              'cronbox.run_late_report']::regclass[];
    v_shared regclass[] := ARRAY['cronbox.job_dependency', 'cronbox.queue_limit', 'cronbox.job_after_edge',
                                 'cronbox.pool']::regclass[];
BEGIN
    FOR c IN SELECT conrelid::regclass AS t, conname FROM pg_catalog.pg_constraint
             WHERE contype = 'f' AND conparentid = 0
               AND (conrelid = ANY (v_hot || v_shared) OR confrelid = ANY (v_hot || v_shared)) LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', c.t, c.conname);
    END LOOP;
    FOR c IN SELECT conrelid::regclass AS t, conname FROM pg_catalog.pg_constraint
             WHERE contype IN ('p', 'u') AND conparentid = 0 AND conrelid = ANY (v_hot) LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', c.t, c.conname);
    END LOOP;
END
$$;
ALTER TABLE cronbox.job ADD CONSTRAINT job_pkey PRIMARY KEY (bucket, job_id);
ALTER TABLE cronbox.job ADD CONSTRAINT job_name_unique UNIQUE (bucket, name);
ALTER TABLE cronbox.job_future ADD CONSTRAINT job_future_pkey PRIMARY KEY (bucket, future_id);
ALTER TABLE cronbox.job_future ADD CONSTRAINT job_future_fire_unique UNIQUE (bucket, job_id, fire_at, attempt, origin);
ALTER TABLE cronbox.job_stat ADD CONSTRAINT job_stat_pkey PRIMARY KEY (bucket, job_id);
ALTER TABLE cronbox.job_fire ADD CONSTRAINT job_fire_pkey PRIMARY KEY (bucket, job_id);
ALTER TABLE cronbox.backfill ADD CONSTRAINT backfill_pkey PRIMARY KEY (bucket, backfill_id);
ALTER TABLE cronbox.outbox ADD CONSTRAINT outbox_pkey PRIMARY KEY (bucket, outbox_id);
ALTER TABLE cronbox.job_stat_change ADD CONSTRAINT job_stat_change_pkey PRIMARY KEY (bucket, change_id);
ALTER TABLE cronbox.run ADD CONSTRAINT run_pkey PRIMARY KEY (bucket, run_id);
ALTER TABLE cronbox.run_late_report ADD CONSTRAINT run_late_report_pkey PRIMARY KEY (bucket, run_id);

-- (3) policies without subqueries: on a job, its owner by a plain call; on the other tables,
-- the callers that read or write every schedule's rows
DO $$
DECLARE
    p record;
    v_read text;
    v_write text;
BEGIN
    FOR p IN SELECT c.oid::regclass AS t, c.relname, pol.polname, pol.polcmd, pol.polpermissive,
                    pg_catalog.pg_get_expr(pol.polqual, pol.polrelid) AS qual,
                    pg_catalog.pg_get_expr(pol.polwithcheck, pol.polrelid) AS with_check,
                    (SELECT pg_catalog.string_agg(CASE WHEN r = 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(a.rolname) END, ', ')
                     FROM pg_catalog.unnest(pol.polroles) r LEFT JOIN pg_catalog.pg_authid a ON a.oid = r) AS roles
             FROM pg_catalog.pg_policy pol JOIN pg_catalog.pg_class c ON c.oid = pol.polrelid
             WHERE c.relnamespace = 'cronbox'::regnamespace
               AND c.relname IN ('job', 'job_future', 'job_stat', 'job_fire', 'backfill', 'outbox', 'job_stat_change',
                                 'run', 'run_late_report', 'job_calendar', 'job_change')
               AND (pg_catalog.pg_get_expr(pol.polqual, pol.polrelid) ~ 'SELECT'
                    OR pg_catalog.pg_get_expr(pol.polwithcheck, pol.polrelid) ~ 'SELECT') LOOP
        IF p.relname = 'job' THEN
            v_read := 'cronbox.caller_reads_all() OR owner = cronbox.caller()';
            v_write := 'cronbox.caller_writes_all() OR owner = cronbox.caller()';
        ELSE
            v_read := 'cronbox.caller_reads_all()';
            v_write := 'cronbox.caller_writes_all()';
        END IF;
        EXECUTE format('DROP POLICY %I ON %s', p.polname, p.t);
        EXECUTE format('CREATE POLICY %I ON %s AS %s FOR %s TO %s%s%s', p.polname, p.t,
                       CASE WHEN p.polpermissive THEN 'PERMISSIVE' ELSE 'RESTRICTIVE' END,
                       CASE p.polcmd WHEN 'r' THEN 'SELECT' WHEN 'a' THEN 'INSERT' WHEN 'w' THEN 'UPDATE'
                                     WHEN 'd' THEN 'DELETE' ELSE 'ALL' END,
                       p.roles,
                       CASE WHEN p.qual IS NOT NULL
                            THEN format(' USING (%s)', CASE WHEN p.polcmd = 'r' THEN v_read ELSE v_write END) END,
                       CASE WHEN p.with_check IS NOT NULL THEN format(' WITH CHECK (%s)', v_write) END);
    END LOOP;
END
$$;

-- (4) distributed by bucket, colocated with the buckets (the history's partitions with it);
-- the small shared tables every bucket reads: a copy on every node
SELECT pg_catalog.create_distributed_table(t, 'bucket', colocate_with => 'cronbox.bucket_shard')
FROM pg_catalog.unnest(ARRAY['cronbox.job', 'cronbox.job_future', 'cronbox.job_stat', 'cronbox.job_fire',
                             'cronbox.backfill', 'cronbox.outbox', 'cronbox.job_stat_change', 'cronbox.run',
                             'cronbox.run_late_report']) WITH ORDINALITY AS u(t, n)
ORDER BY n;
-- the colocated tables' keys to their job (each command on its own: Citus sends a distributed
-- table's DDL to the workers as the statement's text, which must be one command)
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['job_fire', 'job_stat', 'backfill'] LOOP
        EXECUTE format('ALTER TABLE cronbox.%I ADD CONSTRAINT %I FOREIGN KEY (bucket, job_id)'
                       ' REFERENCES cronbox.job (bucket, job_id) ON DELETE CASCADE', t, t || '_job_fkey');
    END LOOP;
END
$$;
SELECT pg_catalog.create_reference_table(t)
FROM pg_catalog.unnest(ARRAY['cronbox.job_dependency', 'cronbox.queue_limit', 'cronbox.job_after_edge',
                             'cronbox.pool']) WITH ORDINALITY AS u(t, n)
ORDER BY n;
