-- 0210: tenants. Queues can be granted to owner roles (who may schedule onto them) and to
-- worker roles (who may work their runs), and each owner role can be given a quota (most
-- schedules, most fires per second, most urgent priority). Set by administrators through
-- cronbox.grant_queue / revoke_queue / set_quota; shown by the views cronbox.queue_grants and
-- cronbox.quotas (docs/operations.md, "Tenants").
--
-- A queue with no grant of a kind stays open for that kind, as before this migration: a
-- single-tenant setup needs none of this.

CREATE TABLE cronbox.queue_grant (
    queue       text NOT NULL,
    grantee     name NOT NULL,
    kind        text NOT NULL
        CONSTRAINT queue_grant_kind_known CHECK (kind IN ('owner',    -- may schedule and trigger onto the queue
                                                          'worker')), -- may claim, start, heartbeat, complete, fail its runs
    granted_by  name NOT NULL,
    granted_at  timestamptz NOT NULL,
    CONSTRAINT queue_grant_pkey PRIMARY KEY (kind, queue, grantee)
);
-- the grants of a role (is this worker limited, which queues may it work)
CREATE INDEX queue_grant_grantee_idx ON cronbox.queue_grant (kind, grantee);

COMMENT ON TABLE cronbox.queue_grant IS
    'Queues granted to owner roles (schedule, trigger) and worker roles (claim and report runs). A queue without grants of a kind is open to every role of that kind.';

CREATE TABLE cronbox.owner_quota (
    owner                 name PRIMARY KEY,
    max_schedules         integer
        CONSTRAINT owner_quota_max_schedules_bounded CHECK (max_schedules BETWEEN 0 AND 10000000),
    max_fires_per_second  double precision
        CONSTRAINT owner_quota_max_fires_bounded CHECK (max_fires_per_second > 0 AND max_fires_per_second <= 100000),
    top_priority          integer
        CONSTRAINT owner_quota_top_priority_bounded CHECK (top_priority BETWEEN -32768 AND 32767),
    -- kept by the job insert/delete triggers (cronbox.count_owner_schedules) and schedule():
    -- the owner's schedules and the sum of their fire rates (cronbox.job.fire_rate)
    schedules             integer NOT NULL DEFAULT 0,
    fire_rate             double precision NOT NULL DEFAULT 0,
    -- manual fires (trigger) beyond max_fires_per_second wait for this time (a token bucket)
    manual_slot           timestamptz,
    updated_by            name NOT NULL,
    updated_at            timestamptz NOT NULL
);

COMMENT ON TABLE cronbox.owner_quota IS
    'Per owner role: most schedules, most fires per second, most urgent priority (NULL: no limit), and what the owner uses now.';

-- A schedule's nominal fires per second (cronbox.schedule_fire_rate), kept for the owners that
-- have a quota (NULL otherwise until set_quota computes it).
ALTER TABLE cronbox.job ADD COLUMN fire_rate double precision;
