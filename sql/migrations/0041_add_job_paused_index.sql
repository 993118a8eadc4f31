-- 0041: count paused schedules cheaply for /metrics (cronbox.metrics_gauges) with a million
-- jobs: paused ones are few, so the partial index is tiny.
CREATE INDEX job_paused_idx ON cronbox.job (job_id) WHERE paused;
