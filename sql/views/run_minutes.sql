-- cronbox.run_minutes: finished runs per minute (by finish time) and queue, succeeded vs failed
-- (failed or lost), as far back as cronbox.run_minute keeps (2 days). The web console's
-- overview chart and "failures in the last hour" read it. Three parts, each cheap however
-- large history is: the counts cronbox.tally_runs made (the poller, every minute); the runs
-- created since its mark (the last minute or so, a primary-key range); the runs it saw
-- unfinished that have finished since (by primary key). Row security: an owner sees its own.
DROP VIEW IF EXISTS cronbox.run_minutes;
CREATE VIEW cronbox.run_minutes AS
SELECT x.minute, x.queue, sum(x.succeeded)::bigint AS succeeded, sum(x.failed)::bigint AS failed
FROM (
    SELECT m.minute, m.queue, m.succeeded, m.failed FROM cronbox.run_minute m
    UNION ALL
    SELECT date_trunc('minute', r.finished_at), r.queue,
           (r.state = 'succeeded')::integer, (r.state <> 'succeeded')::integer
    FROM cronbox.run r
    WHERE r.run_id >= (SELECT t.next_run_id FROM cronbox.run_tally_mark t)
      AND r.state IN ('succeeded', 'failed', 'lost') AND r.finished_at IS NOT NULL
    UNION ALL
    SELECT date_trunc('minute', r.finished_at), r.queue,
           (r.state = 'succeeded')::integer, (r.state <> 'succeeded')::integer
    FROM cronbox.run_tally_pending p JOIN cronbox.run r ON r.run_id = p.run_id AND r.job_id = p.job_id AND r.queue = p.queue
    WHERE r.state IN ('succeeded', 'failed', 'lost') AND r.finished_at IS NOT NULL
) x
GROUP BY x.minute, x.queue;
COMMENT ON VIEW cronbox.run_minutes IS 'Finished runs per minute (finish time) and queue: succeeded, failed (failed or lost); the last 2 days, from the per-minute counts cronbox.tally_runs keeps plus the runs it has not counted yet.';
