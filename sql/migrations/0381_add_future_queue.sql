-- 0381: every future carries its job's queue, so that dispatch shares each batch between the
-- queues with due work (docs/architecture.md, "Fair dispatch"): a burst of tens of thousands of
-- fires due in one queue no longer delays another queue's fire by more than one batch. Written
-- by every statement that writes a future (from the job), and by schedule() when a job moves to
-- another queue. It only orders dispatch: what dispatch decides (queue limits, grants) reads
-- the job's queue. The default serves rows inserted by hand (a test, a bench); the poller's
-- and the API's writes always name the job's queue.
ALTER TABLE cronbox.job_future ADD COLUMN queue text NOT NULL DEFAULT 'default';
UPDATE cronbox.job_future f SET queue = j.queue
FROM cronbox.job j WHERE j.job_id = f.job_id AND f.queue IS DISTINCT FROM j.queue;

-- Serves cronbox.dispatch: the queues with ready futures (a loose scan, one probe per queue and
-- priority in use), then each queue's due futures in priority and due order, up to its share
-- of the batch.
CREATE INDEX job_future_lane_idx ON cronbox.job_future (queue, priority, due_at) WHERE hold IS NULL;
