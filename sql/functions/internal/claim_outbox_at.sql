-- Internal: the body of cronbox.claim_outbox, with the time as its last parameter p_now. The public
-- cronbox.claim_outbox passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.claim_outbox_at(p_owner, p_limit, p_lease, p_queues, p_exclude, p_ahead, p_bucket, p_parts, p_now):
-- the relay's claim. Leases up to p_limit available outbox rows to p_owner for p_lease (lease_until), walking
-- outbox_queue_idx (queue, available_at) queue by queue (migration 0192): the queues with rows
-- (a loose index scan, one probe per queue), only those in p_queues (NULL = all) and not in
-- p_exclude, each probed for its first claimable row, then taken in the order of those first
-- rows, each queue's rows oldest first, FOR UPDATE SKIP LOCKED (relays get disjoint rows) until
-- p_limit. So a queue the relay leaves out (pulled, or a lane that is full or whose sink is down)
-- costs one probe per claim, however many rows wait in it. available_at is left alone, and no
-- index covers the lease columns, so a claim is a HOT update (migration 0120); rows under a live
-- lease are skipped in the queue's walk. A relay that dies leaves rows that come back when the
-- lease ends. Counts the attempt; returns the messages (json) with their deadline (now + timeout),
-- and each message's idempotency key and fire time.
-- p_ahead (CRONBOX_DISPATCH_LEAD) also takes rows that become available within p_ahead
-- (written early by cronbox.dispatch_ahead): the relay holds them until available_at, which
-- is returned, and the lease runs from then. Not a row flagged claim_at_due (an early 'skip'
-- run, which must stay withdrawable until its time): that one only from its available_at, and a
-- queue's look ahead stops before its first such row (outbox_flagged_idx, migration 0465).
-- By bucket (docs/citus.md, "Every hot statement a single-shard query"): each statement reads
-- and locks the rows of a set of buckets (`bucket = ANY (v_set)` on every reference to the
-- outbox): p_bucket alone when named; when not, every bucket (cronbox.bucket_walks): where the
-- outbox is distributed by bucket one bucket per statement, in turn from a random one until
-- p_limit rows are taken, so each is a router query on one shard; anywhere else all of them in
-- one statement (plain PostgreSQL has one bucket, 0: the filter is true of every row).
-- Returns each row's bucket (what an ack by bucket names).
-- p_parts: a run's message (one built from its row, not a redriven one's) comes as its parts
-- (job, payload as text, attempt, deadline) with message NULL, for a caller that writes the same
-- text itself (the relay: relay/message.py), when its fire time and deadline are within
-- 1900-2100 (what the relay renders exactly); otherwise the message is built here as without it.
CREATE OR REPLACE FUNCTION cronbox.claim_outbox_at(
    p_owner text,
    p_limit integer,
    p_lease interval DEFAULT '30 seconds',
    p_queues text[] DEFAULT NULL,
    p_exclude text[] DEFAULT NULL,
    p_ahead interval DEFAULT '0',
    p_bucket integer DEFAULT NULL,
    p_parts boolean DEFAULT false,
    p_now timestamptz DEFAULT now()
) RETURNS TABLE (outbox_id bigint, run_id bigint, queue text, kind text, message json, attempts integer,
                 available_at timestamptz, bucket integer, idempotency_key text, fire_at timestamptz,
                 job text, payload text, attempt integer, deadline timestamptz)
-- plpgsql, not sql: a SQL function that is not inlined (SECURITY DEFINER) is planned again at
-- every call, ~5 ms for this statement against 0.4 ms to run it; plpgsql keeps the plan for the
-- session (bench: one-row claim 5.9 -> 0.7 ms, the most of trigger() -> receipt).
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off  -- short OLTP statements: compiling costs more than running
-- One plan per session: a custom plan per call (the default while the parameters look like they
-- matter) re-plans the join to the run partitions and their row-security quals each time,
-- ~15 ms against ~3 ms for the whole one-row claim with the plan kept; the statement's shape
-- (queue-by-queue index walks, run partitions pruned at run time) does not depend on them.
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off  -- a plan kept from an empty table: docs/architecture.md, SQL conventions
AS $$
DECLARE
    v_walks integer[];
    v_set integer[];
    v_start integer;
    v_taken integer := 0;
    v_n integer;
    v_ids bigint[];
BEGIN
    -- Runs as cronbox_runner, whom row security lets through (docs/architecture.md, "Row security
    -- on the batch paths"): only an all-seeing caller may, as only such roles may call it.
    IF NOT cronbox.caller_writes_all() THEN
        RAISE EXCEPTION 'claim_outbox: only a caller that may act on every schedule may call it'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- One bucket per statement where the outbox is distributed by bucket (on Citus, one shard:
    -- docs/citus.md): p_bucket, or every bucket in turn from a random one until p_limit rows
    -- are taken; where it is not (plain PostgreSQL, one bucket), every bucket in one statement,
    -- as before (cronbox.bucket_walks).
    v_walks := cronbox.bucket_walks('cronbox.outbox', p_bucket);
    v_start := floor(random() * array_length(v_walks, 1))::integer;
    FOR i IN 0 .. array_length(v_walks, 1) - 1 LOOP
        EXIT WHEN v_taken >= p_limit;
        v_set := ARRAY(SELECT unnest(v_walks[(v_start + i) % array_length(v_walks, 1) + 1 : (v_start + i) % array_length(v_walks, 1) + 1]));
        SELECT coalesce(array_agg(p.outbox_id ORDER BY p.outbox_id), '{}')
          INTO v_ids
        FROM (
            WITH RECURSIVE
            -- The queues with rows in the outbox, one index probe each.
            queues(q) AS (
                (SELECT o.queue FROM cronbox.outbox o WHERE o.bucket = ANY (v_set) ORDER BY o.queue LIMIT 1)
                UNION ALL
                SELECT (SELECT o.queue FROM cronbox.outbox o WHERE o.bucket = ANY (v_set) AND o.queue > queues.q
                        ORDER BY o.queue LIMIT 1)
                FROM queues WHERE queues.q IS NOT NULL
            ),
            -- Those the caller claims, each with its first claimable row (past its rows in flight)
            -- and where its look ahead stops: before its first row flagged claim_at_due due ahead
            -- (an early 'skip' run, claimable only from its due time; outbox_flagged_idx, one
            -- probe). The rows after it are due after it: the relay wakes at its due time
            -- (cronbox.next_claim_at_due) and claims them then, so none is late for it, and no
            -- claim walks a burst of flagged rows under one due time (a million early 'skip'
            -- runs of one minute were walked whole by every claim within the lead of it). The
            -- rows due at the very time of that flagged row are looked at too, a bounded number
            -- (below), so a queue with nothing claimable before it stays.
            heads AS MATERIALIZED (
                SELECT s.q, h.available_at AS head, s.stop
                FROM (
                    SELECT queues.q,
                           coalesce(CASE WHEN p_ahead > interval '0' THEN (
                               SELECT f.available_at FROM cronbox.outbox f
                               WHERE f.bucket = ANY (v_set) AND f.queue = queues.q AND f.claim_at_due
                                 AND f.available_at > p_now AND f.available_at <= p_now + p_ahead
                               ORDER BY f.available_at
                               LIMIT 1) END, 'infinity') AS stop
                    FROM queues
                    WHERE queues.q IS NOT NULL
                      AND (p_queues IS NULL OR queues.q = ANY (p_queues))
                      AND (p_exclude IS NULL OR queues.q <> ALL (p_exclude))
                ) s
                LEFT JOIN LATERAL (
                    SELECT o.available_at
                    FROM cronbox.outbox o
                    WHERE o.bucket = ANY (v_set) AND o.queue = s.q AND o.available_at <= p_now + p_ahead
                      AND o.available_at < s.stop
                      AND (o.lease_until IS NULL OR o.lease_until <= p_now)
                      AND o.delivered_at IS NULL
                      AND (o.available_at <= p_now OR NOT o.claim_at_due)  -- an early 'skip' run: from its time
                    ORDER BY o.available_at
                    LIMIT 1
                ) h ON true
                WHERE h.available_at IS NOT NULL OR s.stop < 'infinity'
            ),
            -- Queue by queue, oldest first row first; rows are locked only as far as the claim needs.
            -- Each queue's walk starts at its first claimable row, not at the queue's start: the
            -- rows before it (in flight under a live lease, acked and dead) were just passed by
            -- the probe above, and walking them again cost as much as the probe (a relay's
            -- batches in flight are thousands of rows). A row before it that became claimable
            -- since the statement began is taken by the next claim.
            picked AS (
                SELECT x.outbox_id, x.available_at
                FROM (SELECT heads.q, heads.head, heads.stop FROM heads
                      ORDER BY coalesce(heads.head, heads.stop), heads.q) hq
                CROSS JOIN LATERAL (
                    SELECT a.outbox_id, a.available_at FROM (SELECT o.outbox_id, o.available_at
                    FROM cronbox.outbox o
                    WHERE o.bucket = ANY (v_set) AND o.queue = hq.q
                      AND o.available_at >= hq.head AND o.available_at <= p_now + p_ahead
                      AND o.available_at < hq.stop
                      AND (o.lease_until IS NULL OR o.lease_until <= p_now)
                      -- a run whose delivery was acked (or pulled) is never sent again; one a worker
                      -- started before any relay's ack is (at least once: the kit drops the duplicate)
                      AND o.delivered_at IS NULL
                      -- an early 'skip' run stays withdrawable until its time: never held ahead
                      AND (o.available_at <= p_now OR NOT o.claim_at_due)
                    ORDER BY o.available_at
                    LIMIT p_limit - v_taken
                    FOR UPDATE SKIP LOCKED) a
                    UNION ALL
                    -- The rows due at the very time of the queue's first flagged row ahead, those not
                    -- flagged: among the first p_limit entries of that time only (flagged rows,
                    -- and rows held by relays, among them), so the claim stays bounded however many
                    -- share it; the others of that time wait for it, and are claimed with it.
                    SELECT b.outbox_id, b.available_at FROM (SELECT o.outbox_id, o.available_at
                     FROM cronbox.outbox o
                     WHERE hq.stop < 'infinity' AND o.bucket = ANY (v_set)
                       AND o.outbox_id = ANY (ARRAY(
                           SELECT t.outbox_id FROM cronbox.outbox t
                           WHERE t.bucket = ANY (v_set) AND t.queue = hq.q AND t.available_at = hq.stop
                           ORDER BY t.available_at
                           LIMIT p_limit - v_taken))
                       AND NOT o.claim_at_due
                       AND (o.lease_until IS NULL OR o.lease_until <= p_now) AND o.delivered_at IS NULL
                     LIMIT p_limit - v_taken
                     FOR UPDATE SKIP LOCKED) b
                ) x
                LIMIT p_limit - v_taken
            )
            SELECT picked.outbox_id, picked.available_at FROM picked) p;
        CONTINUE WHEN cardinality(v_ids) = 0;
        -- The rows taken, by key: a statement of its own, as Citus routes no data-modifying CTE
        -- beside a recursive one to a single shard. The lease end is computed in UTC (timestamp
        -- + interval and AT TIME ZONE are IMMUTABLE; timestamptz + interval is STABLE, which
        -- Citus runs on no row's column in an UPDATE: docs/citus.md), so no join with arrays
        -- is needed (a nested loop over an array per row taken was quadratic in the batch). The
        -- rows are found by key (= ANY), never by a walk joined to the claim: the plan is kept
        -- for the session, and one made while the statistics said the outbox was empty (VACUUM
        -- after a drain) walked the whole outbox once per row taken.
        RETURN QUERY
        WITH leased AS (
            UPDATE cronbox.outbox o SET
                -- from the row's due time (available_at: a claim leaves it alone) or now
                lease_until = ((greatest(o.available_at, p_now) AT TIME ZONE 'UTC') + p_lease) AT TIME ZONE 'UTC',
                lease_owner = p_owner,
                attempts = o.attempts + 1
            WHERE o.bucket = ANY (v_set) AND o.outbox_id = ANY (v_ids)
            RETURNING o.outbox_id, o.run_id, o.queue, o.kind, o.message, o.job_name, o.payload, o.fire_at,
                      o.attempt, o.timeout, o.attempts, o.available_at, o.bucket
        )
        -- a run's row carries no message: built from the row itself (the run in flight), deadline
        -- included (one object per run), outside the update (Citus runs no STABLE function of a
        -- row's columns inside an UPDATE); a redriven run's row carries the message as sent.
        -- As json, the text the relay sends (cronbox.run_message_json writes it once; a jsonb
        -- object was built, then rendered); its idempotency key and fire time beside it, so that
        -- no caller reads them back out of the text. With p_parts, a run's message is not built
        -- (NULL) but its parts returned (job, payload as text, attempt, deadline), for a caller
        -- that writes the same text itself (the relay, relay/message.py: rendering the message
        -- was the largest part of the claim's CPU per row); only for times the caller renders
        -- exactly (1900 to 2100, as float8 epoch seconds: microseconds exact), else built here.
        SELECT l.outbox_id, l.run_id, l.queue, l.kind,
               CASE WHEN l.kind <> 'run' THEN l.message::json
                    WHEN l.parts THEN NULL
                    WHEN l.message IS NULL
                    THEN cronbox.run_message_json(l.outbox_id, l.job_name, l.queue, l.payload, l.fire_at, l.attempt,
                                                  l.deadline)
                    ELSE (l.message || jsonb_build_object('deadline', l.deadline))::json END,
               l.attempts, l.available_at, l.bucket,
               CASE WHEN l.kind = 'run' AND l.message IS NULL
                    THEN textcat(textcat(l.outbox_id::text, ':'), l.attempt::text)
                    ELSE l.message ->> 'idempotency_key' END,
               CASE WHEN l.kind = 'run' AND l.message IS NULL THEN l.fire_at
                    ELSE (l.message ->> 'fire_at')::timestamptz END,
               CASE WHEN l.parts THEN l.job_name END,
               CASE WHEN l.parts THEN l.payload::text END,
               CASE WHEN l.parts THEN l.attempt END,
               CASE WHEN l.parts THEN l.deadline END
        FROM (SELECT k.*,
                     p_parts AND k.kind = 'run' AND k.message IS NULL
                         AND k.fire_at >= '1900-01-01 00:00:00+00' AND k.fire_at < '2100-01-01 00:00:00+00'
                         AND k.deadline >= '1900-01-01 00:00:00+00' AND k.deadline < '2100-01-01 00:00:00+00' AS parts
              FROM (SELECT x.*, greatest(x.available_at, p_now) + x.timeout AS deadline FROM leased x) k) l;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_taken := v_taken + v_n;
    END LOOP;
END
$$;

COMMENT ON FUNCTION cronbox.claim_outbox_at(text, integer, interval, text[], text[], interval, integer, boolean, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.claim_outbox(text, integer, interval, text[], text[], interval, integer, boolean) with the time as p_now; tests use it to fix the clock. Relay: leases up to p_limit outbox rows available by now + p_ahead (SKIP LOCKED; queue by queue on outbox_queue_idx, a left-out queue costs one probe) for p_lease from their available time (a row flagged claim_at_due, an early skip run, only once available), only queues in p_queues (NULL = all) and not in p_exclude, from bucket p_bucket (NULL = every bucket in turn, one statement each), and returns the messages (json), deadline included, when each is due, its bucket, and the message''s idempotency key and fire time. Unacked rows come back when the lease ends: at least once.';

ALTER FUNCTION cronbox.claim_outbox_at(text, integer, interval, text[], text[], interval, integer, boolean, timestamp with time zone) OWNER TO cronbox_runner;
REVOKE ALL ON FUNCTION cronbox.claim_outbox_at(text, integer, interval, text[], text[], interval, integer, boolean, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
