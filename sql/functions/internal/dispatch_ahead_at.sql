-- Internal: the body of cronbox.dispatch_ahead, with the time as its last parameter p_now. The public
-- cronbox.dispatch_ahead passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.dispatch_ahead_at(p_limit, p_lead, p_now): the poller's early dispatch (CRONBOX_DISPATCH_LEAD).
-- Writes run + outbox rows for up to p_limit ready futures due in (p_now, p_now + p_lead] whose
-- decision cannot change between now and their due time, so that the relay can hold the
-- messages and send them at the due time itself instead of starting a claim then:
--   * scheduled fires only (origin 'schedule': not trigger(), retries or after-jobs);
--   * of unpaused jobs with overlap 'allow' (no earlier run can change the decision), no
--     upstream dependency (add_dependency: the gate looks at upstream successes) and a queue
--     without a queue limit (slots are counted when taken);
--   * with p_lead longer than 1 second (a burst's), also a 'skip' job's first fire when no run of
--     the job is unfinished: marked on job_stat (early_due_at, the statistics before it) so that
--     whatever makes another run of the job unfinished first takes it back without a trace
--     (cronbox.withdraw_early_skip_runs), and claimable only from its due time (claim_at_due).
-- Everything else waits for cronbox.dispatch at its due time. The outbox row is available at
-- the future's due time (claim_outbox(p_ahead) lets a relay take it up to p_ahead early and
-- hold it); the run is dispatched as of its due time. The price: a fire decided early has been
-- decided: pause(), unschedule() or an update withdraw early runs no relay holds yet
-- (cronbox.withdraw_early_runs), not those a relay holds (docs/runs.md, "Early dispatch").
-- The batch is shared between the queues with fires within the lead, as dispatch shares its
-- own: a burst of one queue does not take the whole lead's batch ahead of another queue's fire.
-- Locks as dispatch: futures FOR UPDATE SKIP LOCKED, then their jobs' locks (their job_stat
-- rows FOR NO KEY UPDATE SKIP LOCKED in one statement, skipped when held elsewhere). The write is dispatch's own
-- (cronbox.dispatch_locked): one path for both.
-- The walk resumes where the last one stopped (p_walked_to, p_walked_id: what a complete call
-- returned as walked_to, walked_id): the futures due up to p_walked_to were all examined then,
-- those with a future_id up to p_walked_id at least, so only the futures due after it are walked
-- by due time, and of those due before it only the ones written since (future_id > p_walked_id,
-- walked by key): an ineligible future (a 'skip' job's fire, the default) is read once on its
-- way through the lead, not by every call (docs/architecture.md, "Early dispatch's walk").
-- walked_to and walked_id are NULL unless the call examined everything within the lead (no
-- batch cut short, no job busy elsewhere): the next call then walks it all again.
CREATE OR REPLACE FUNCTION cronbox.dispatch_ahead_at(
    p_limit integer,
    p_lead interval,
    p_bucket integer DEFAULT NULL,
    p_walked_to timestamptz DEFAULT NULL,
    p_walked_id bigint DEFAULT NULL,
    p_now timestamptz DEFAULT now()) RETURNS TABLE (dispatched integer, busy integer, next_due timestamptz, walked_to timestamptz, walked_id bigint)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off  -- short OLTP statements: compiling costs more than running
SET enable_seqscan = off  -- a plan kept from an empty table: docs/architecture.md, SQL conventions
SET enable_bitmapscan = off  -- the futures are walked in due order, never gathered whole and sorted
AS $$
DECLARE
    v_dispatched integer;
    v_picked integer;
    v_futures bigint[];
    v_jobs bigint[];
    v_taken bigint[];       -- every future picked (locked), its job locked here or not
    v_lane_queue text[];    -- the lanes (queue, priority) with fires within the lead: queues in turn
    v_lane_prio integer[];
    v_queues integer;       -- queues with fires within the lead
    v_share integer;        -- the most futures one queue takes in this walk
    v_walks integer[];      -- the bucket sets walked (cronbox.bucket_walks), a statement series each
    v_set integer[];
    v_start integer;
    v_left integer;         -- what the batch has left for this set
    v_total_dispatched integer := 0;
    v_total_picked integer := 0;
    v_from timestamptz;     -- futures due in (p_now, v_from] were walked by an earlier call
    v_set_from timestamptz; -- v_from for this set, or p_now when too many futures were written since
    v_max_id bigint;        -- the newest future of the set when this call began
    v_walked_id bigint;     -- the least of them over the sets (NULL: not walked whole)
    v_whole boolean := true;  -- every future within the lead examined (none cut short or busy)
    -- 'skip' jobs' first fires are taken too, by a lead longer than 1 second only (a burst's:
    -- poller/lead.py grows it): the relay claims an early 'skip' run only once it is due, at its
    -- next wake-up (within half its lead), later than a run decided at its time and notified.
    v_skip boolean := p_lead > interval '1 second';
    v_skip_jobs bigint[];     -- the 'skip' jobs of the batch
    v_plain boolean;          -- the batch is plain (cronbox.dispatch_plain's sense): written as read
    v_fires cronbox.dispatch_fire[];  -- the batch as decided under the locks, when plain
BEGIN
    IF p_limit IS NULL OR p_limit < 1 THEN
        RAISE EXCEPTION 'p_limit: must be at least 1, got %', p_limit USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_lead IS NULL THEN
        RAISE EXCEPTION 'p_lead: must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_lead < interval '0' OR p_lead > interval '1 hour' THEN
        RAISE EXCEPTION 'p_lead: must be between 0 and 1 hour, got %', p_lead USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_walked_id IS NOT NULL AND p_walked_to IS NOT NULL THEN
        v_from := greatest(p_now, least(p_walked_to, p_now + p_lead));
    ELSE
        v_from := p_now;
    END IF;
    -- By bucket, as dispatch (docs/citus.md, "A queue spans buckets"): every statement reads
    -- and writes one set of buckets (cronbox.bucket_walks): one bucket per set where job_future
    -- is distributed by bucket, in turn from a random one; elsewhere one set, one pass.
    v_walks := cronbox.bucket_walks('cronbox.job_future', p_bucket);
    v_start := CASE WHEN array_length(v_walks, 1) > 1 THEN floor(random() * array_length(v_walks, 1))::integer ELSE 0 END;
    FOR w IN 0 .. array_length(v_walks, 1) - 1 LOOP
        IF v_total_picked >= p_limit THEN
            v_whole := false;  -- sets left unwalked
            EXIT;
        END IF;
        v_set := ARRAY(SELECT unnest(v_walks[(v_start + w) % array_length(v_walks, 1) + 1 : (v_start + w) % array_length(v_walks, 1) + 1]));
        v_left := p_limit - v_total_picked;
        -- The newest future now (by key, one probe): the next call needs to walk again, in the
        -- part of the lead walked here, only the futures written after it.
        SELECT coalesce(max(f.future_id), 0) INTO v_max_id FROM cronbox.job_future f WHERE f.bucket = ANY (v_set);
        v_walked_id := least(v_walked_id, v_max_id);  -- (least ignores the first NULL)
        -- Resumed only when few futures were written since (each is read once below); after
        -- more (a catch-up or a saturation pass from empty writing faster than the calls come)
        -- the whole lead, as if no call had walked it: reading what was written would cost more
        -- than the walk it saves, and a fire due soon is still found.
        -- (100,000: a whole walk of a million fires inside the lead takes ~2 s, while ~35,000
        -- are written at a million every-minute schedules; a lower bound never resumed there.)
        v_set_from := CASE WHEN v_max_id - p_walked_id <= 100000 THEN v_from ELSE p_now END;
        v_taken := '{}';
        v_futures := '{}';
        v_jobs := '{}';

        -- 0. In the part of the lead an earlier call walked whole, only the futures written since
        --    (future_id > p_walked_id, in the order they were written: a new schedule's first
        --    fire, say), eligible as in step 1. A future written before v_max_id but committed
        --    after this call's walk is passed over by the next one: dispatch takes it at its due
        --    time, as it does a future locked elsewhere (SKIP LOCKED) during a walk.
        IF v_set_from > p_now THEN
            WITH
            picked AS MATERIALIZED (
                -- One range of the primary key, the ids written since (probing each id by key, a
                -- descent per id, held a call 1.5 s beside a catch-up writing ~100,000 futures
                -- a second). Ready is written so that no index on
                -- `hold IS NULL` matches: with it, a plan made while the table looked small
                -- walked the whole lane index filtering the ids.
                SELECT f.future_id, f.job_id
                FROM cronbox.job_future f
                WHERE f.future_id > p_walked_id AND f.future_id <= v_max_id AND f.bucket = ANY (v_set)
                  AND coalesce(f.hold, '') = '' AND f.origin = 'schedule'
                  AND f.due_at > p_now AND f.due_at <= v_set_from
                  AND (SELECT (j.overlap = 'allow'
                               -- or a 'skip' job's first fire with no run of the job unfinished (docs/runs.md)
                               OR (v_skip AND j.overlap = 'skip' AND f.overlap IS NULL AND f.payload IS NULL AND j.every_mode = 'fixed_rate'
                                   AND j.kind IN ('cron', 'every') AND j.ends_at IS NULL AND j.max_runs IS NULL AND j.finished_at IS NULL
                                   AND (SELECT s.active_runs = 0 FROM cronbox.job_stat s WHERE s.bucket = ANY (v_set) AND s.job_id = f.job_id)
                                   AND NOT EXISTS (SELECT 1 FROM cronbox.job_future g WHERE g.bucket = ANY (v_set) AND g.job_id = f.job_id
                                                   AND g.fire_at <= f.fire_at AND g.future_id <> f.future_id)))
                              AND NOT j.paused AND j.needs IS NULL
                              AND NOT EXISTS (SELECT 1 FROM cronbox.queue_limit q WHERE q.queue = j.queue)
                              AND NOT EXISTS (SELECT 1 FROM cronbox.job_dependency d WHERE d.job_id = j.job_id)
                       FROM cronbox.job j WHERE j.bucket = ANY (v_set) AND j.job_id = f.job_id)
                -- in key order: the range is walked on the primary key whatever the statistics (a
                -- plan kept from a moment the range looked large walked the lane index instead,
                -- every future of the lead)
                ORDER BY f.future_id
                LIMIT v_left
                FOR UPDATE OF f SKIP LOCKED
            ),
            locked AS MATERIALIZED (
                SELECT s.job_id
                FROM cronbox.job_stat s
                WHERE s.bucket = ANY (v_set)
                  AND s.job_id = ANY (ARRAY(SELECT picked.job_id FROM picked))  -- by key: SQL conventions
                FOR NO KEY UPDATE OF s SKIP LOCKED
            )
            SELECT coalesce(array_agg(p.future_id), '{}'),
                   coalesce(array_agg(p.future_id) FILTER (WHERE p.job_id IN (SELECT locked.job_id FROM locked)), '{}'),
                   coalesce(array_agg(DISTINCT p.job_id) FILTER (WHERE p.job_id IN (SELECT locked.job_id FROM locked)), '{}')
              INTO v_taken, v_futures, v_jobs
            FROM picked p;
            IF cardinality(v_taken) >= v_left THEN
                v_whole := false;  -- cut short: more may be waiting
            END IF;
        END IF;

        -- 1. Eligible ready futures due within the lead, shared between the queues that have some
        --    as dispatch shares its batch (docs/architecture.md, "Fair dispatch"): each queue's
        --    lanes (priority by priority, due order) up to its share, queues in an order drawn afresh
        --    per call; a second walk gives what queues with fewer fires left to the others. Then
        --    their jobs' locks, skipping a job busy elsewhere (retried soon). The job's eligibility
        --    is a scalar sub-SELECT per future, never a join: each walk stays on job_future_lane_idx
        --    in due order and stops at its share, whatever the row estimates (a join let the planner
        --    start from cronbox.job and sort every future of a burst inside the lead: ~1 s per call
        --    for 200,000 of them, bench.scale --burst). The queue and dependency checks are in its
        --    select list, where a sub-SELECT stays a probe by key (in WHERE, NOT EXISTS becomes an
        --    anti-join, and a merge anti-join walks every future in job order and sorts them).
        SELECT array_agg(l.queue ORDER BY l.turn, l.priority), array_agg(l.priority ORDER BY l.turn, l.priority),
               count(DISTINCT l.queue)
          INTO v_lane_queue, v_lane_prio, v_queues
        FROM (SELECT r.queue, r.priority, md5(r.queue || p_now::text) AS turn
              FROM cronbox.ready_lanes(v_set) r WHERE r.due_at <= p_now + p_lead) l;
        IF v_queues > 0 AND cardinality(v_taken) >= v_left THEN
            v_queues := 0;  -- the batch is full already (step 0 cut short: not walked whole)
        END IF;
        v_share := ceil((v_left - cardinality(v_taken))::numeric / greatest(v_queues, 1))::integer;
        FOR v_round IN 1..2 LOOP
            EXIT WHEN v_queues = 0;
            WITH
            lane AS (SELECT u.queue, u.n FROM unnest(v_lane_queue) WITH ORDINALITY AS u(queue, n)),
            turn AS (SELECT lane.queue, min(lane.n)::integer AS lo, max(lane.n)::integer AS hi
                     FROM lane GROUP BY lane.queue),
            picked AS MATERIALIZED (
                SELECT x.*
                FROM (SELECT turn.lo, turn.hi FROM turn ORDER BY turn.lo) q
                CROSS JOIN LATERAL (
                    SELECT y.future_id, y.job_id
                    FROM generate_series(q.lo, q.hi) AS i
                    CROSS JOIN LATERAL (
                        SELECT f.future_id, f.job_id
                        FROM cronbox.job_future f
                        -- one range of job_future_lane_idx, written as a range of its whole key
                        WHERE f.hold IS NULL AND f.bucket = ANY (v_set)
                          AND (f.queue, f.priority, f.due_at) > (v_lane_queue[i], v_lane_prio[i], v_set_from)
                          AND (f.queue, f.priority, f.due_at) <= (v_lane_queue[i], v_lane_prio[i], p_now + p_lead)
                          AND f.origin = 'schedule'
                          AND (v_round = 1 OR f.future_id <> ALL (v_taken))  -- taken in the first walk
                          AND (SELECT (j.overlap = 'allow'
                                       -- or a 'skip' job's first fire with no run of the job unfinished (docs/runs.md)
                                       OR (v_skip AND j.overlap = 'skip' AND f.overlap IS NULL AND f.payload IS NULL AND j.every_mode = 'fixed_rate'
                                           AND j.kind IN ('cron', 'every') AND j.ends_at IS NULL AND j.max_runs IS NULL AND j.finished_at IS NULL
                                           AND (SELECT s.active_runs = 0 FROM cronbox.job_stat s WHERE s.bucket = ANY (v_set) AND s.job_id = f.job_id)
                                           AND NOT EXISTS (SELECT 1 FROM cronbox.job_future g WHERE g.bucket = ANY (v_set) AND g.job_id = f.job_id
                                                           AND g.fire_at <= f.fire_at AND g.future_id <> f.future_id)))
                                      AND NOT j.paused AND j.needs IS NULL
                                      AND NOT EXISTS (SELECT 1 FROM cronbox.queue_limit q WHERE q.queue = j.queue)
                                      AND NOT EXISTS (SELECT 1 FROM cronbox.job_dependency d WHERE d.job_id = j.job_id)
                               FROM cronbox.job j WHERE j.bucket = ANY (v_set) AND j.job_id = f.job_id)
                        ORDER BY f.queue, f.priority, f.due_at
                        LIMIT v_share
                        FOR UPDATE OF f SKIP LOCKED
                    ) y
                    LIMIT v_share
                ) x
                LIMIT v_left - cardinality(v_taken)
            ),
            -- The jobs' locks (their job_stat rows: cronbox.lock_job_id) in one statement, as
            -- dispatch takes them, skipping those held elsewhere (a call per job cost ~60 us each:
            -- half of a 1,000-run call in a burst).
            locked AS MATERIALIZED (
                SELECT s.job_id
                FROM cronbox.job_stat s
                WHERE s.bucket = ANY (v_set)
                  AND s.job_id = ANY (ARRAY(SELECT picked.job_id FROM picked))  -- by key: SQL conventions
                FOR NO KEY UPDATE OF s SKIP LOCKED
            )
            SELECT v_taken || coalesce(array_agg(p.future_id), '{}'),
                   v_futures || coalesce(array_agg(p.future_id) FILTER (WHERE p.job_id IN (SELECT locked.job_id FROM locked)), '{}'),
                   v_jobs || coalesce(array_agg(DISTINCT p.job_id) FILTER (WHERE p.job_id IN (SELECT locked.job_id FROM locked)), '{}'),
                   count(*)::integer
              INTO v_taken, v_futures, v_jobs, v_picked
            FROM picked p;
            -- no queue took its whole share: every lane was walked to the end of the lead
            EXIT WHEN v_picked < v_share;
            -- one queue, or the batch is full: nothing to give, and more may be waiting
            IF v_queues = 1 OR cardinality(v_taken) >= v_left OR v_round = 2 THEN
                v_whole := false;
                EXIT;
            END IF;
            v_share := v_left - cardinality(v_taken);
        END LOOP;
        v_picked := cardinality(v_taken);
        IF cardinality(v_futures) = 0 THEN
            v_futures := NULL;
            v_jobs := NULL;
        ELSE  -- a job may have fires in both walks (step 0, several queues' lanes)
            v_jobs := ARRAY(SELECT DISTINCT j FROM unnest(v_jobs) AS j);
        END IF;

        -- 2. Still eligible, read under the locks (a pause or an update that committed before them
        --    is seen here; one after them waits for this transaction).
        --    A 'skip' job's fire: still its first, still with no run of the job unfinished.
        --    The same read decides the batch for the write when it is plain (as
        --    cronbox.dispatch_plain decides one: every fire a run, no fire with an overlap policy
        --    of its own, no queue limit on its job's queue, one fire per job or every fire
        --    'allow'): the job row is read once under the locks, not again by the write.
        v_skip_jobs := NULL;
        v_plain := false;
        IF v_jobs IS NOT NULL THEN
            -- each future by key, its job and statistics by probes (a lateral probe with LIMIT 1
            -- and scalar sub-SELECTs, never a join: docs/architecture.md, SQL conventions); the
            -- job row once per fire, its verdict as one value (0: not eligible; 1: eligible; 2:
            -- eligible, a 'skip' job), materialized (a subquery pulled up copied the sub-SELECT
            -- into each of the aggregates' filters: a probe of the job row per filter)
            WITH x AS MATERIALIZED (
                SELECT f.future_id, f.job_id, f.fire_at, f.due_at, f.priority, f.attempt, f.origin, f.retry_of,
                       f.bucket, f.hold, f.overlap AS future_overlap, j.name, j.queue, j.message_payload,
                       j.timeout, j.overlap, j.verdict, fo.folded,
                       -- no queue limit at all (one probe per statement), else the job's queue's, a probe per fire
                       ((SELECT NOT EXISTS (SELECT 1 FROM cronbox.queue_limit))
                        OR NOT EXISTS (SELECT 1 FROM cronbox.queue_limit q WHERE q.queue = j.queue)) AS unlimited
                FROM cronbox.job_future f
                CROSS JOIN LATERAL (
                    SELECT j.name, j.queue, coalesce(f.payload, j.payload) AS message_payload, j.timeout, j.overlap,
                           j.every_mode,
                           CASE WHEN ((j.overlap = 'allow'
                                       OR (v_skip AND j.overlap = 'skip' AND f.overlap IS NULL AND f.payload IS NULL
                                           AND j.every_mode = 'fixed_rate' AND j.kind IN ('cron', 'every')
                                           AND j.ends_at IS NULL AND j.max_runs IS NULL AND j.finished_at IS NULL
                                           AND (SELECT s.active_runs = 0 FROM cronbox.job_stat s
                                                WHERE s.bucket = ANY (v_set) AND s.job_id = f.job_id)
                                           AND NOT EXISTS (SELECT 1 FROM cronbox.job_future g
                                                           WHERE g.bucket = ANY (v_set) AND g.job_id = f.job_id
                                                             AND g.fire_at <= f.fire_at AND g.future_id <> f.future_id)))
                                      AND NOT j.paused AND j.needs IS NULL
                                      AND NOT EXISTS (SELECT 1 FROM cronbox.job_dependency d WHERE d.job_id = j.job_id))
                                     IS NOT TRUE THEN 0
                                WHEN j.overlap = 'skip' THEN 2 ELSE 1 END AS verdict
                    FROM cronbox.job j WHERE j.bucket = ANY (v_set) AND j.job_id = f.job_id LIMIT 1) j
                -- OFFSET 0: evaluated once per fire (as in cronbox.dispatch_plain)
                CROSS JOIN LATERAL (SELECT t.folded FROM cronbox.job_stat_folded(f.job_id, j.overlap, j.every_mode, j.name, '{}') t
                                    OFFSET 0) fo
                WHERE f.bucket = ANY (v_set) AND f.future_id = ANY (v_futures) AND f.job_id = ANY (v_jobs)
            )
            SELECT array_agg(x.future_id) FILTER (WHERE x.verdict > 0),
                   array_agg(DISTINCT x.job_id) FILTER (WHERE x.verdict > 0),
                   array_agg(x.job_id) FILTER (WHERE x.verdict = 2),
                   coalesce(bool_and(x.hold IS NULL AND (x.future_overlap IS NULL OR x.future_overlap = 'allow') AND x.unlimited)
                              FILTER (WHERE x.verdict > 0), true)
                   AND (count(*) FILTER (WHERE x.verdict > 0) = count(DISTINCT x.job_id) FILTER (WHERE x.verdict > 0)
                        OR coalesce(bool_and(x.overlap = 'allow') FILTER (WHERE x.verdict > 0), true)),
                   -- every eligible fire a run (a 'skip' job's: no run of it unfinished); run ids
                   -- drawn in fire order; active_runs is not read by the write
                   array_agg(ROW(x.future_id, x.job_id, x.name, x.queue, x.fire_at, x.due_at, x.priority, x.attempt,
                                 x.origin, x.retry_of, x.message_payload, x.timeout, x.overlap, NULL, NULL,
                                 NULL, NULL, NULL, NULL, NULL, NULL, x.bucket, NULL, NULL, NULL, x.folded, 'run', NULL
                                )::cronbox.dispatch_fire ORDER BY x.fire_at, x.future_id) FILTER (WHERE x.verdict > 0)
              INTO v_futures, v_jobs, v_skip_jobs, v_plain, v_fires
            FROM x;
            IF v_futures IS NULL THEN
                v_jobs := NULL;
            END IF;
        END IF;

        -- 3. The same write as dispatch: every eligible fire is a run, dispatched as of its due
        --    time and available to the relays then. A plain batch is written as decided above
        --    (cronbox.dispatch_plain_fires) once no early 'skip' run of its jobs waits to be
        --    taken back (cronbox.withdraw_early_skip_runs, as dispatch_locked first calls it: none
        --    taken back, the read above still holds); any other batch by cronbox.dispatch_locked,
        --    which reads and decides it again.
        v_dispatched := 0;
        IF v_futures IS NOT NULL THEN
            IF v_plain AND cronbox.withdraw_early_skip_runs(v_jobs, p_now, v_set) = 0 THEN
                SELECT d.dispatched INTO v_dispatched
                FROM cronbox.dispatch_plain_fires(v_fires, p_now, v_set, v_skip_jobs) d;
            ELSE
                SELECT d.dispatched INTO v_dispatched
                FROM cronbox.dispatch_locked(v_futures, v_jobs, NULL, p_now, v_set, v_skip_jobs) d;
            END IF;
            -- A 'skip' job's early run: claimable only from its due time (claim_at_due, set as
            -- dispatch_locked inserts it): a relay holding it would keep it from being taken
            -- back; and marked on its job (its due time, the statistics before it) by the same
            -- update as its statistics, so that whatever makes another run of the job unfinished
            -- before that time takes it back first (cronbox.withdraw_early_skip_runs). A job
            -- whose last fire it decided is logged finished there too.
        END IF;
        v_total_dispatched := v_total_dispatched + v_dispatched;
        v_total_picked := v_total_picked + v_picked;
    END LOOP;
    -- busy: eligible fires whose job was locked elsewhere (a saturation pass, a worker's report):
    -- worth another try soon, before they are due.
    -- Walked whole (and no job busy: its fires are worth another try): the next call may resume.
    v_whole := v_whole AND v_total_picked = v_total_dispatched;
    RETURN QUERY SELECT v_total_dispatched, v_total_picked - v_total_dispatched, cronbox.next_due_in(v_walks, p_bucket),
                        CASE WHEN v_whole THEN p_now + p_lead END, CASE WHEN v_whole THEN v_walked_id END;
END
$$;

COMMENT ON FUNCTION cronbox.dispatch_ahead_at(integer, interval, integer, timestamp with time zone, bigint, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.dispatch_ahead(integer, interval, integer, timestamptz, bigint) with the time as p_now; tests use it to fix the clock. Poller (CRONBOX_DISPATCH_LEAD): writes run + outbox rows, available at their due time, for up to p_limit scheduled fires due within p_lead of jobs whose decision cannot change before then (overlap allow, or with p_lead over 1 second a skip job''s first fire with no run unfinished, claimable only from its due time; unpaused, no dependency, no queue limit, no pool needs). Returns the count, the eligible fires skipped because their job was locked elsewhere (busy), the next due time, and where the walk may resume (walked_to, walked_id: NULL unless it examined everything within the lead).';

ALTER FUNCTION cronbox.dispatch_ahead_at(integer, interval, integer, timestamp with time zone, bigint, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.dispatch_ahead_at(integer, interval, integer, timestamp with time zone, bigint, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
