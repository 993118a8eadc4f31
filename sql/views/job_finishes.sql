-- cronbox.job_finishes: the jobs that have finished, as the
-- change log shows them: nothing left to schedule (job.finished_at, set when saturation found no
-- fire left) and no scheduled fire pending (each one dispatched, skipped, failed or missed). A
-- job is here from the commit that decided its last scheduled fire: dispatch writes nothing for
-- it. changed_at is the time of that last fire (job_fire.frontier), or the time the job was
-- finished when later (schedule() lowering max_runs). cronbox.schedule_changes shows these rows
-- as 'finished' unless the finish is logged already (a 'finished' row since finished_at:
-- written by the poller when a catch-up drops the last fire, by fixed delay past ends_at, by
-- cronbox.record_finished before schedule() reopens or unschedule() deletes the job, or by an
-- earlier release's dispatch). Joins on the bucket and the job id (pushed down on Citus).
-- schedule_changes reads this view: dropped with it here, recreated by its own file after.
-- cronbox.record_finished writes the same read out per table (Citus prunes each by the bucket).
DROP VIEW IF EXISTS cronbox.job_finishes CASCADE;
CREATE VIEW cronbox.job_finishes AS
SELECT j.job_id, j.bucket, j.name, j.finished_at,
       greatest(j.finished_at, jf.frontier) AS changed_at,
       CASE WHEN j.max_runs IS NOT NULL AND jf.fires_made >= j.max_runs
                THEN format('max_runs reached: %s fires', j.max_runs)
            WHEN j.kind = 'at' THEN 'one-off fire handled'
            WHEN j.ends_at IS NOT NULL THEN 'ends_at passed'
            ELSE 'no fire left' END AS reason
FROM cronbox.job j
JOIN cronbox.job_fire jf ON jf.bucket = j.bucket AND jf.job_id = j.job_id
WHERE j.finished_at IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM cronbox.job_future f
                  WHERE f.bucket = j.bucket AND f.job_id = j.job_id AND f.origin = 'schedule');
COMMENT ON VIEW cronbox.job_finishes IS 'Internal: the finished jobs (nothing left to schedule, no scheduled fire pending), with the time and reason cronbox.schedule_changes shows for their finish.';
