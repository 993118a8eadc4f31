-- 0030: dead letters. An outbox row the relay gave up on (a non-retryable answer, or
-- CRONBOX_RELAY_MAX_ATTEMPTS failed sends) moves here, out of the hot outbox, with its last
-- error. cronbox.redrive() moves rows back. Rare rows, read by operators: no hot index.
CREATE TABLE cronbox.dead_letter (
    dead_letter_id  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    outbox_id       bigint NOT NULL,          -- the outbox row it was (a new id on redrive)
    run_id          bigint,                   -- NULL for notifications
    queue           text NOT NULL,
    kind            text NOT NULL,
    message         jsonb NOT NULL,
    timeout         interval NOT NULL,
    created_at      timestamptz NOT NULL,     -- when the message was first written
    attempts        integer NOT NULL,         -- delivery attempts made
    last_error      text,
    lease_owner     text,                     -- the relay that gave up
    dead_at         timestamptz NOT NULL DEFAULT now()
);
-- Serves cronbox.redrive(queue => ...) and the dead_letters view per queue.
CREATE INDEX dead_letter_queue_idx ON cronbox.dead_letter (queue, dead_letter_id);
