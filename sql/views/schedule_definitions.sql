-- cronbox.schedule_definitions: each job's full definition as given to cronbox.schedule()
-- (the web console's schedule page; cronbox.schedules shows state, this shows the settings).
-- Its option columns are those declared by cronbox.schedule_options(), in that order, so a new
-- option shows here on the next `cronbox migrate` without an edit of this file. fires_made: the
-- scheduled fires counted towards max_runs. Joined on (bucket, job_id): one shard's join on Citus.
DROP VIEW IF EXISTS cronbox.schedule_definitions;
DO $view$
BEGIN
    EXECUTE format(
        'CREATE VIEW cronbox.schedule_definitions AS SELECT j.name, j.kind, j.cron_normalized, %s, '
        'j.definition_version, j.owner, j.job_id, jf.fires_made '
        'FROM cronbox.job j JOIN cronbox.job_fire jf ON jf.bucket = j.bucket AND jf.job_id = j.job_id',
        (SELECT string_agg('j.' || quote_ident(o.option), ', ') FROM cronbox.schedule_options() o));
END
$view$;
COMMENT ON VIEW cronbox.schedule_definitions IS 'Each schedule''s definition as passed to cronbox.schedule(): expression, payload, queue, retry, timeout, catch-up and window settings (the options of cronbox.schedule_options()).';
