-- 0474: every job statistics change row (cronbox.job_stat_change) says the bucket of its jobs, all
-- of one bucket: each writer (dispatch's write, the finishing calls) writes a row per bucket of
-- the jobs it changed, so that the poller's fold can go bucket by bucket (cronbox.fold_job_stats
-- with p_bucket: a job's changes all carry its bucket, so a fold of one bucket folds them in
-- their order). The rows written before, with NULL (migration 0470: a statement over several
-- buckets), are given their jobs' bucket here, then the column is NOT NULL.
-- No writer or fold runs meanwhile (the lock; a fold of one job reads the table too).
LOCK TABLE cronbox.job_stat_change IN ACCESS EXCLUSIVE MODE;

-- A row whose jobs are all of one bucket (every row on plain PostgreSQL, bucket 0): that bucket.
-- A job without a row (unscheduled since) names no bucket: its entries fold nothing.
UPDATE cronbox.job_stat_change c SET bucket = coalesce(b.bucket, 0)
FROM (SELECT x.change_id, min(j.bucket) AS bucket, count(DISTINCT j.bucket) AS buckets
      FROM cronbox.job_stat_change x
      CROSS JOIN LATERAL unnest(x.job_ids) AS u(job_id)
      LEFT JOIN cronbox.job j ON j.job_id = u.job_id
      WHERE x.bucket IS NULL
      GROUP BY x.change_id) b
WHERE c.change_id = b.change_id AND b.buckets <= 1;

-- A row whose jobs are of several buckets (a database migrated with --citus, its tables still
-- the coordinator's own): split into a row per bucket. The fold applies a job's changes in
-- change_id order, so the split rows and every row after the first of them are written again
-- in that order, with new ids (above every old one); an entry a fold of its job alone
-- (cronbox.fold_job_stats_of) has folded already (its change_id at or below the job's
-- job_stat.folded_through) is dropped, since its new id would be above that watermark.
DO $$
DECLARE
    v_first bigint;
    v_last bigint;
BEGIN
    SELECT min(c.change_id) INTO v_first FROM cronbox.job_stat_change c WHERE c.bucket IS NULL;
    IF v_first IS NULL THEN
        RETURN;
    END IF;
    SELECT max(c.change_id) INTO v_last FROM cronbox.job_stat_change c;
    INSERT INTO cronbox.job_stat_change (job_ids, active, last_fire, last_run, last_state, ok,
                                         failures, crashes, missed, success_at, bucket)
    SELECT array_agg(e.job_id ORDER BY e.n), array_agg(e.active ORDER BY e.n),
           array_agg(e.last_fire ORDER BY e.n), array_agg(e.last_run ORDER BY e.n),
           array_agg(e.last_state ORDER BY e.n), array_agg(e.ok ORDER BY e.n),
           array_agg(e.failures ORDER BY e.n), array_agg(e.crashes ORDER BY e.n),
           array_agg(e.missed ORDER BY e.n), min(e.success_at), e.bucket
    FROM (SELECT c.change_id, c.success_at, u.*,
                 coalesce(c.bucket, j.bucket, 0) AS bucket
          FROM cronbox.job_stat_change c
          CROSS JOIN LATERAL unnest(c.job_ids, c.active, c.last_fire, c.last_run, c.last_state,
                                    c.ok, c.failures, c.crashes, c.missed) WITH ORDINALITY
              AS u(job_id, active, last_fire, last_run, last_state, ok, failures, crashes, missed, n)
          LEFT JOIN cronbox.job j ON j.job_id = u.job_id
          LEFT JOIN cronbox.job_stat s ON s.job_id = u.job_id
          WHERE c.change_id >= v_first
            AND c.change_id > coalesce(s.folded_through, 0)) e
    GROUP BY e.change_id, e.bucket
    ORDER BY e.change_id, e.bucket;
    DELETE FROM cronbox.job_stat_change c WHERE c.change_id BETWEEN v_first AND v_last;
END
$$;

ALTER TABLE cronbox.job_stat_change ALTER COLUMN bucket SET NOT NULL;
