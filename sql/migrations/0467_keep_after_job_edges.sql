-- 0467: the after-job edges (which job waits on which upstream name) kept in a table of their
-- own, cronbox.job_after_edge, beside each job's `after` list (cronbox.job.after, still the
-- definition). A finishing call looks up the after-jobs naming the jobs it finished; read
-- from cronbox.job that is a walk over every after-job of every bucket, which on Citus (job
-- distributed by bucket) is a join across shards. The edges are small and change only when a
-- schedule is written, so the Citus layer can make this a reference table (a copy on every
-- node) and a finishing call reads it where its bucket is (docs/citus.md).
-- One row per (upstream name, job): the name as listed (an upstream need not exist yet, or
-- any more), the job that waits and that job's bucket. Kept by cronbox.sync_after_edges,
-- called by cronbox.add_job_rows (every new job), cronbox.schedule (an update) and deleted by
-- cronbox.unschedule. No foreign key: Citus allows none from a reference table to a
-- distributed one. No row security: only SECURITY DEFINER functions read it (as
-- cronbox.job_name_search).
CREATE TABLE cronbox.job_after_edge (
    upstream  text NOT NULL,
    job_id    bigint NOT NULL,
    bucket    integer NOT NULL,
    PRIMARY KEY (upstream, job_id)
);
CREATE INDEX job_after_edge_job_idx ON cronbox.job_after_edge (job_id);

INSERT INTO cronbox.job_after_edge (upstream, job_id, bucket)
SELECT DISTINCT u.name, j.job_id, j.bucket
FROM cronbox.job j CROSS JOIN LATERAL unnest(j.after) AS u(name)
WHERE j.after IS NOT NULL AND u.name IS NOT NULL;
