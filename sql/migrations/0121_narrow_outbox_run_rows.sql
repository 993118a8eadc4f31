-- 0121: a run's outbox row no longer copies its message. The message of a run
-- (cronbox.run_message: run_id, job, queue, payload, fire_at, attempt, idempotency_key) is
-- made of the run row's own columns, so the relay's claim builds it from the run (a
-- primary-key probe per row) instead of dispatch writing it twice. A run's outbox row shrinks
-- from ~330 to ~120 bytes: less WAL at dispatch, and the claim's lease update (a HOT update
-- since 0120) writes a small tuple. Notifications (no run) keep their message in the row, as
-- do rows put back by cronbox.redrive (the dead letter kept the message). fillfactor 50: a
-- batch claim leases every row of a page at once, so the page needs room for a second
-- version of each row for the update to stay on the page (HOT); the outbox is a short table.
ALTER TABLE cronbox.outbox ALTER COLUMN message DROP NOT NULL;
ALTER TABLE cronbox.outbox ADD CONSTRAINT outbox_message_present
    CHECK (kind = 'run' AND run_id IS NOT NULL OR message IS NOT NULL);
ALTER TABLE cronbox.outbox SET (fillfactor = 50);
COMMENT ON COLUMN cronbox.outbox.message IS
    'The message as sent. NULL for a run''s row written by dispatch: the claim builds it from the run row (cronbox.run_message).';
