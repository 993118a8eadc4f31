-- raw, one row in flight: the outbox row carries the run until its final report (a copy of
-- cronbox.outbox with the run's in-flight columns, keyed by the run id), so no run row is
-- written before the run ends. Recreated empty before each measurement.
CREATE SCHEMA IF NOT EXISTS cronbox_bench;
DROP TABLE IF EXISTS cronbox_bench.outbox;
CREATE TABLE cronbox_bench.outbox (LIKE cronbox.outbox INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    WITH (fillfactor = 35);
-- (cronbox.outbox has the in-flight columns itself since migration 0380; added here when
-- measured against an earlier schema)
ALTER TABLE cronbox_bench.outbox
    ADD PRIMARY KEY (outbox_id),                  -- = the run id for a run's row
    ADD COLUMN IF NOT EXISTS job_id bigint,
    ADD COLUMN IF NOT EXISTS fire_at timestamptz,
    ADD COLUMN IF NOT EXISTS due_at timestamptz,
    ADD COLUMN IF NOT EXISTS attempt integer,
    ADD COLUMN IF NOT EXISTS dispatched_at timestamptz,
    ADD COLUMN IF NOT EXISTS worker text,
    ADD COLUMN IF NOT EXISTS cancel_requested boolean NOT NULL DEFAULT false;
CREATE INDEX ON cronbox_bench.outbox (queue, available_at);   -- as cronbox.outbox_queue_idx
