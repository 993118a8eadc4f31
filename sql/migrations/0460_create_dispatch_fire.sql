-- 0460: cronbox.dispatch_fire, the row dispatch's write (cronbox.dispatch_locked) passes from
-- the statement that reads a batch's fires in their bucket and decides what their job says of
-- them (paused, dependency gate, overlap, catch-up) to the statements that write: the queue
-- limits' and pools' share, the runs and their outbox rows, then the bucket's futures and
-- statistics. On Citus no statement of that write reads a bucket's shards beside the
-- coordinator's own tables (docs/citus.md, "What a hot statement must look like on Citus"); on
-- plain PostgreSQL the array stays in the function's memory. pre: the decision taken before the
-- overlap policy (hold_paused, hold_dependency, fail_dependency), wish the overlap's, else NULL.
CREATE TYPE cronbox.dispatch_fire AS (
    future_id           bigint,
    job_id              bigint,
    name                text,
    queue               text,
    fire_at             timestamptz,
    due_at              timestamptz,
    priority            integer,
    attempt             integer,
    origin              text,
    retry_of            bigint,
    message_payload     jsonb,
    timeout             interval,
    overlap             text,
    active_runs         integer,
    catchup             text,
    needs               jsonb,
    on_unavailable      text,
    unavailable_timeout interval,
    held_since          timestamptz,
    retry_delay         interval,
    retry_max_delay     interval,
    bucket              integer,
    waiting             text,
    timeout_at          timestamptz,
    pre                 text,
    folded              boolean,
    wish                text
);
COMMENT ON TYPE cronbox.dispatch_fire IS
    'Internal: a fire of a dispatch batch as decided in its bucket (its job''s columns, the dependency gate in pre, the overlap policy in wish), passed between the statements of cronbox.dispatch_locked.';
