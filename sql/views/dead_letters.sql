-- cronbox.dead_letters: messages the relay gave up on, newest first; redrive with cronbox.redrive().
DROP VIEW IF EXISTS cronbox.dead_letters;
CREATE VIEW cronbox.dead_letters AS
SELECT d.dead_letter_id, d.queue, d.kind, d.run_id, d.message ->> 'job' AS job, d.attempts,
       d.last_error, d.created_at, d.dead_at, d.lease_owner AS relay, d.message, d.outbox_id
FROM cronbox.dead_letter d;
COMMENT ON VIEW cronbox.dead_letters IS 'Undeliverable outbox messages with their last error and attempts; cronbox.redrive(id => ...) / (queue => ...) / (everything => true) puts them back.';
