-- 0485: the ready futures lose their second index. job_future_ready_idx (priority, due_at)
-- WHERE hold IS NULL served dispatch's walk until job_future_lane_idx (queue, priority, due_at)
-- WHERE hold IS NULL (0381) took it over; it was left serving the reads that ask for ready
-- futures across queues: the next due time (cronbox.next_due), the count of fires ahead
-- (cronbox.due_ahead) and cronbox.queues. Each of those now walks the lanes (a loose scan of the
-- lane index over its (queue, priority) pairs, one probe per pair in use, then a range of due
-- times per pair), so every future stored writes one index entry fewer (pkey, the fire's
-- unique key, the lane) and the index no longer grows and is vacuumed beside the table.
DROP INDEX IF EXISTS cronbox.job_future_ready_idx;
