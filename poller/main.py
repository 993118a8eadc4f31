"""`cronbox poller`: the dispatch loop and the saturation loop, with the reaper and maintenance
on the side.

Any number of pollers may run against one database: saturation and dispatch both claim with
SKIP LOCKED, so correctness never depends on there being one.

Dispatch: one `cronbox.dispatch` call per tick; again at once while batches come back full (up
to the per-wake-up cap, CRONBOX_DISPATCH_TICK_CAP); otherwise sleep until the next due time
(from the database clock), a NOTIFY (a schedule changed, futures were written or released),
or the poll interval (the backstop), whichever comes first.

Saturation runs in its own tasks (CRONBOX_SATURATE_WORKERS, each on its own connection: one
computes while another writes), sized by time (CRONBOX_SATURATE_HOLD: PassSizer), and computes
fires in a worker thread in slices (CRONBOX_SATURATE_SLICE), so a due fire never waits behind a saturation pass (a pass
over 500 jobs firing every second writes ~30,000 futures and took seconds: the p99 of the
latency bench; a year of catch-up for 250 jobs held the event loop for 25 s). It passes again at once while batches come back
full, wakes the dispatch loop when it wrote futures (the next due time may have moved
earlier), and otherwise sleeps until a NOTIFY or the poll interval.

On a database with the Citus layer (`cronbox migrate --citus`) the pollers share the buckets
with no leader (cronbox/buckets.py, docs/citus.md "No leader"): each renews its lease on its
share (side task `keep_leased`, every third of CRONBOX_POLLER_BUCKET_LEASE) and works only the
buckets it holds: a dispatch tick is one dispatch (and early-dispatch) call per held bucket,
starting one bucket further each tick, until the batch is full; a saturation pass claims from
one held bucket, the next pass from the next, and a saturation worker sleeps once a pass of
every held bucket found nothing more. A renewal that changes its buckets wakes both loops;
SIGTERM releases them. On plain PostgreSQL none of this runs (looked for once at start): one
call over every bucket, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import psycopg

from cronbox import db, metrics
from cronbox.buckets import BucketLeases, Turns, keep_leased, leases_buckets, wake_on_change
from cronbox.config import Config, check_dispatch_lead, listen_target
from cronbox.log import event
from cronbox.proc import Waker, cancel_quietly, identity, listen
from cronbox.registry import keep_registered
from poller import metrics as poller_metrics, store
from poller.maintenance import maintenance_loop, reaper_loop
from poller.health import LoopHealth
from poller.lead import LeadPlanner, profile_loop
from poller.quarantine import CONNECTION_ERRORS, describe, isolate, quarantine
from poller.saturate import Pass, saturate_pass
from poller.settings import PollerSettings

log = logging.getLogger("cronbox.poller")
T = TypeVar("T")

MAINTENANCE_EVERY = 60.0
# The time a dispatch batch aims to take (statement and commit): a longer one makes the next
# ones smaller, quick full ones grow them back up to CRONBOX_DISPATCH_BATCH.
DISPATCH_HOLD = 0.3
# Due futures exist but none could be taken (their jobs are locked by a worker reporting or
# by schedule()): look again soon rather than at once.
BUSY_RETRY = 0.02


@dataclasses.dataclass
class Tick:
    again: bool          # a batch came back full (or was cut, or a fire came due meanwhile): go again at once
    sleep: float         # otherwise sleep this long (seconds)
    dispatched: int
    full: bool = False   # the batch came back full: due fires are waiting (a backlog)
    decided: int = 0     # futures the batch took (dispatched, skipped, failed, held, early)


async def _dispatch_isolating(conn, limit: int, grace, cause: BaseException,
                              bucket: int | None = None) -> store.Dispatched:
    """The batch failed: find the job(s) at fault by bisecting the due jobs (each half in its
    own savepoint), quarantine them, and commit what the others dispatched, in one transaction.
    With `bucket`, the batch was that bucket's, and so is each half."""
    event(log, "dispatch batch failed, isolating", level=logging.WARNING, error=describe(cause))
    async with conn.transaction():
        jobs = await store.due_jobs(conn, limit)

        async def run(subset):
            return await store.dispatch(conn, limit, subset, grace, bucket)

        done, bad = await isolate(conn, jobs, run, cause)
        for job_id, error in bad:
            await quarantine(conn, job_id, f"cannot dispatch: {error}", "dispatch")
    waits = [r[4] for r in done if r[4] is not None]
    wait = min(waits) if waits else None  # none: sleep the poll interval
    return (sum(r[0] for r in done), sum(r[1] for r in done), sum(r[2] for r in done),
            sum(r[3] for r in done), wait, any(r[5] for r in done))


def lead_planner(cfg: Config, ps: PollerSettings) -> LeadPlanner:
    """CRONBOX_DISPATCH_LEAD, grown for bursts up to CRONBOX_DISPATCH_LEAD_MAX, itself kept
    within half the horizon (the futures of a longer lead do not exist yet)."""
    cap = max(cfg.dispatch_lead, min(ps.dispatch_lead_max, ps.horizon / 2))
    return LeadPlanner(cfg.dispatch_lead, cap, refresh=max(2.0, cfg.poll_interval.total_seconds()))


EVERY_BUCKET: tuple[int | None, ...] = (None,)  # plain PostgreSQL: one call over every bucket


async def tick(pool, cfg: Config, ps: PollerSettings, limit: int, planner: LeadPlanner | None = None,
               buckets: Sequence[int | None] = EVERY_BUCKET,
               walks: dict[int, store.Walked | None] | None = None) -> Tick:
    """One dispatch batch of at most `limit` due futures (saturation is the other loop's); with
    CRONBOX_DISPATCH_LEAD, then early dispatch of what is due within the lead (grown for a
    burst: poller/lead.py) and eligible. A batch that fails (whatever the row) is retried
    without the job(s) at fault, which are quarantined: the other jobs go out in the same tick.
    `buckets`: one call per bucket, in this order, until the batch is full (a poller leasing
    buckets: those it holds; none: nothing to do); by default one call over every bucket.
    `walks`: where each held bucket's early-dispatch walk resumes, kept across ticks by the
    caller (any value is safe: a fire a walk passes over goes at its due time)."""
    planner = planner or lead_planner(cfg, ps)
    walks = {} if walks is None else walks
    grace = ps.misfire_grace
    t0 = time.monotonic()
    dispatched = skipped = failed = held = decided = early = busy = 0
    # each bucket visited: the monotonic time its next fire comes due (None: none), and whether
    # one due before the statement began was left behind (its job locked elsewhere)
    due: dict[int | None, tuple[float | None, bool]] = {}

    def note(bucket: int | None, wait, behind: bool) -> None:
        # `wait` counts from the end of the statement that read it
        due[bucket] = (None if wait is None else time.monotonic() + float(wait), bool(behind))

    cut = False
    lead = planner.lead() if planner.on else None
    async with pool.connection() as conn:
        async def one(bucket: int | None, asked: int) -> int:
            nonlocal dispatched, skipped, failed, held, decided
            try:
                d = await store.dispatch(conn, asked, None, grace, bucket)
            except CONNECTION_ERRORS:
                raise
            except Exception as exc:
                d = await _dispatch_isolating(conn, asked, grace, exc, bucket)
            note(bucket, d[4], d[5])
            dispatched, skipped, failed, held = dispatched + d[0], skipped + d[1], failed + d[2], held + d[3]
            decided = dispatched + skipped + failed + held
            return d[0] + d[1] + d[2] + d[3]

        # Each bucket its share of the batch first, then those that filled it the room left, in
        # turn: a backlog in one bucket never keeps another's due fire out of the tick (one
        # bucket, plain PostgreSQL's: one call of the whole batch).
        share = -(-limit // max(1, len(buckets)))
        filled: list[int | None] = []
        for bucket in buckets:
            asked = min(limit - decided, share)
            if asked <= 0:
                break
            if await one(bucket, asked) >= asked and asked < limit:
                filled.append(bucket)
        for bucket in filled:
            if decided >= limit:
                break
            await one(bucket, limit - decided)
        # A fire came due while dispatch's statement ran (a jittered fire, say: between whole
        # seconds): no early call now, however small; the loop goes again at once and takes it.
        # Not twice in a row: fires coming due faster than dispatch's statements run would
        # otherwise keep early dispatch from its fires, which then all go at their due time.
        # (One due before the statement began yet not taken is behind: its job is locked
        # elsewhere, and early dispatch goes on meanwhile.)
        now = time.monotonic()
        due_now = any(at is not None and not behind and at <= now for at, behind in due.values())
        deferred, planner.deferred = planner.deferred, False
        if lead and decided < limit and due_now and not deferred:
            planner.deferred = True
        elif lead and decided < limit:
            try:
                # sized to end before the next fire comes due, which then is dispatch's at once
                room = limit - decided
                nexts = [at for at, _ in due.values() if at is not None]
                if nexts:
                    room = min(room, planner.runs_within(min(nexts) - time.monotonic()))
                for bucket in buckets:
                    # each bucket's walk resumes at its own cursor (plain PostgreSQL: the planner's)
                    walked = planner.walked if bucket is None else walks.get(bucket)
                    e, b, wait, behind, walked = await store.dispatch_ahead(conn, room - early, lead, walked, bucket)
                    if bucket is None:
                        planner.walked = walked
                    else:
                        walks[bucket] = walked
                    note(bucket, wait, behind)
                    early, busy = early + e, busy + b
                    if early >= room:
                        break
                cut = early >= room < limit - decided
            except CONNECTION_ERRORS:
                raise
            except Exception as exc:  # early dispatch is an optimisation: due fires go at their time
                event(log, "early dispatch failed", level=logging.WARNING, error=describe(exc))
    # the rate early runs are written at, the whole tick counted (both calls and the commits)
    planner.observe_rate(early, time.monotonic() - t0)
    if decided or early:
        event(log, "dispatched", level=logging.DEBUG, runs=dispatched, skipped=skipped,
              failed=failed, held=held, early=early, lead=lead.total_seconds() if lead else 0)
    full = decided + early >= limit
    again = full or cut
    sleep = cfg.poll_interval.total_seconds()
    nexts = [at for at, _ in due.values() if at is not None]
    if nexts:
        # counted from the statement that read it: the commit and the rest of the tick (tens
        # of milliseconds on a busy machine) are not slept again on top
        wait = min(nexts) - time.monotonic()
        # With a lead, wake `lead` before the next fire, which may be eligible for early
        # dispatch; a fire already inside the lead that was not taken is dispatch's at its
        # due time.
        if lead and wait - lead.total_seconds() > 0:
            wait -= lead.total_seconds()
        sleep = min(sleep, wait)
        if any(behind for _, behind in due.values()) or busy:  # due (or early-eligible) fires whose jobs were locked elsewhere
            sleep = min(max(sleep, 0.0), BUSY_RETRY)
        elif sleep <= 0:  # came due during this tick (a jittered fire, say): take it at once
            again = True
    return Tick(again=again, sleep=max(sleep, 0.0), dispatched=dispatched + early, full=full,
                decided=decided + early)


@dataclasses.dataclass
class Backlog:
    """Set by the dispatch loop: its last batch came back full (due fires are waiting). The
    saturation loop then writes no catch-up (catchup => 'all' replaying fires from before the
    misfire grace, poller.plan): it would queue ahead of fires coming due meanwhile. Jobs it
    merely reaches late (at most their latest missed fire) are saturated all the same."""
    busy: bool = False


@dataclasses.dataclass
class PassSizer:
    """Saturation passes sized by time, not by count: a pass holds its jobs' locks from the
    claim to the commit, and on a loaded machine a thousand jobs or ten thousand fires take
    seconds to store. A pass that held them longer than `hold` makes the next ones smaller
    (in proportion, with a margin); a quick pass that took all it could lets them grow back
    (at most doubling) up to the configured size; one that found far less to do than it could
    take brings the size back to START, so a burst after a quiet spell (a thousand catch-ups created
    at once) begins with passes of a quarter of the size and grows from what they take. One
    per poller, shared by its workers. The dispatch loop sizes its batches with one too (not
    cautious: a quiet spell does not shrink them; fire bursts keep their full batches)."""
    hold: float          # seconds a pass aims to hold its jobs' locks
    batch: int           # the most jobs per pass (CRONBOX_SATURATE_BATCH)
    scale: float = 0.25  # the share of the full size (jobs, fires, catch-up fires) a pass takes
    workers: int = 1     # passes in flight at once: they share the catch-up allowance
    cautious: bool = True  # a quiet pass brings the size back to START

    MIN_SCALE = 0.001
    START = 0.25

    def jobs(self) -> int:
        return max(1, round(self.batch * self.scale))

    def late_scale(self) -> float:
        """Catch-up fires (stored already due, so queued ahead of fires coming due) per pass:
        the workers share one pass's allowance, so the queue ahead of another job's due fire
        grows no faster with more of them."""
        return self.scale / self.workers

    def observe(self, p: Pass, asked: int) -> None:
        self.adjust(p.seconds, p.claimed, asked, p.cut)

    def adjust(self, seconds: float, took: int, asked: int, cut: bool = False) -> None:
        """A transaction that took `took` of the `asked` size held its locks `seconds`."""
        if not took or seconds <= 0:
            return
        ratio = self.hold / seconds
        if ratio < 1:
            self.scale = max(self.MIN_SCALE, self.scale * ratio * 0.8)
        elif cut or took >= asked:  # it took all it could: there was more to take
            self.scale = min(1.0, self.scale * min(2.0, ratio))
        elif self.cautious and took < asked * self.START:  # far less to do than it could take (not a worker that
            # found the rest of another's batch): the next burst starts from a cautious size
            self.scale = min(self.scale, self.START)


async def saturate(pool, ps: PollerSettings, backlog: Backlog | None = None, sizer: PassSizer | None = None,
                   bucket: int | None = None) -> Pass:
    """One saturation pass (computed in a worker thread, cut after CRONBOX_SATURATE_SLICE),
    sized by `sizer` (the time the previous passes held their locks), of `bucket`'s jobs only
    when given (None: every bucket)."""
    sizer = sizer or PassSizer(ps.saturate_hold, ps.saturate_batch)
    asked, scale, late_scale = sizer.jobs(), sizer.scale, sizer.late_scale()
    async with pool.connection() as conn:
        p = await saturate_pass(conn, batch=asked, horizon=ps.horizon, grace=ps.misfire_grace,
                                budget=ps.saturate_slice, catch_up=not (backlog and backlog.busy), scale=scale,
                                late_scale=late_scale, hold=ps.saturate_hold, bucket=bucket)
    sizer.observe(p, asked)
    poller_metrics.observe_saturation(p.futures)
    if p.claimed:
        event(log, "saturated", level=logging.DEBUG, jobs=p.planned, claimed=p.claimed, futures=p.futures,
              missed=p.missed, deferred=p.deferred, seconds=round(p.seconds, 3), next_batch=sizer.jobs())
    return p


async def _unless_stopped(op: Callable[[], Awaitable[T]], what: str, cfg: Config, waker: Waker) -> T | None:
    """One tick or pass, retried while the database is away. On SIGTERM an in-flight one gets
    the shutdown timeout to finish; one still waiting for the database then is cancelled (its
    transaction rolls back: nothing half-done). None = stop now."""
    work = asyncio.ensure_future(db.retrying(op, budget=3600, what=what, stop=waker.stop))
    stop = asyncio.ensure_future(waker.stop.wait())
    try:
        await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
        if not work.done():
            await asyncio.wait({work}, timeout=cfg.shutdown_timeout.total_seconds())
    finally:
        stop.cancel()
        if not work.done():
            work.cancel()
    try:
        return await work
    except asyncio.CancelledError:
        if waker.stop.is_set():
            return None
        raise
    except (psycopg.OperationalError, psycopg.InterfaceError):
        if waker.stop.is_set():  # asked to stop while the database is away: just stop
            return None
        raise


async def _failed(health: LoopHealth, exc: BaseException, waker: Waker, cfg: Config) -> None:
    """A round failed with something other than a lost connection (retried inside): log it,
    count it for /healthz, back off (up to 5 s) and go on: a loop never dies of one error."""
    health.failed(describe(exc))
    event(log, f"{health.name} failed", level=logging.ERROR, error=describe(exc), failures=health.failures)
    await waker.sleep(min(5.0, max(cfg.poll_interval.total_seconds(), 0.1) * 2 ** min(health.failures, 6)))


async def dispatch_loop(pool, cfg: Config, ps: PollerSettings, waker: Waker,
                        health: LoopHealth | None = None, backlog: Backlog | None = None,
                        leases: BucketLeases | None = None) -> None:
    health = health or LoopHealth("dispatch", register=False)
    backlog = backlog or Backlog()
    planner = lead_planner(cfg, ps)
    # the fires coming due are read beside this loop, never inside a tick (poller/lead.py)
    profile = asyncio.create_task(profile_loop(pool, planner, waker.stop), name="dispatch-profile")
    try:
        await _dispatching(pool, cfg, ps, waker, health, backlog, planner, leases)
    finally:
        await cancel_quietly(profile)


async def _dispatching(pool, cfg: Config, ps: PollerSettings, waker: Waker, health: LoopHealth,
                       backlog: Backlog, planner: LeadPlanner, leases: BucketLeases | None) -> None:
    cap = ps.dispatch_tick_cap
    turns = Turns()  # with leases: each tick visits the held buckets starting one further
    walks: dict[int, store.Walked | None] = {}  # with leases: each held bucket's early-dispatch cursor
    # Batches sized by time as saturation passes are: a batch of a thousand catch-up runs took
    # seconds on a loaded machine, and a fire coming due meanwhile waited for it.
    sizer = PassSizer(DISPATCH_HOLD, ps.dispatch_batch, scale=1.0, cautious=False)
    while not waker.stop.is_set():
        budget = cap
        while not waker.stop.is_set():
            size = sizer.jobs()
            limit = size if cap == 0 else max(1, min(size, budget))
            buckets = EVERY_BUCKET if leases is None else turns.order(leases.held())
            for gone in set(walks) - set(buckets):  # a bucket given up: its cursor with it
                del walks[gone]
            t0 = time.monotonic()
            try:
                t = await _unless_stopped(lambda: tick(pool, cfg, ps, limit, planner, buckets, walks), "poller tick",
                                          cfg, waker)
            except Exception as exc:
                await _failed(health, exc, waker, cfg)
                break
            if t is None:
                return
            sizer.adjust(time.monotonic() - t0, t.decided, limit)
            health.ok()
            metrics.tick("poller")
            backlog.busy = t.full
            budget -= t.dispatched
            if cap and budget <= 0:
                # Capped: the rest waits for the next round, one poll interval away.
                event(log, "dispatch cap reached", level=logging.DEBUG, cap=cap)
                await waker.sleep(cfg.poll_interval.total_seconds())
                break
            if not t.again:
                await waker.sleep(t.sleep)
                break


async def saturate_loop(pool, cfg: Config, ps: PollerSettings, waker: Waker, dispatch_waker: Waker,
                        health: LoopHealth | None = None, backlog: Backlog | None = None,
                        sizer: PassSizer | None = None, leases: BucketLeases | None = None,
                        turns: Turns | None = None) -> None:
    """Saturation passes until stopped; `waker` shares the process's stop event. A poller runs
    CRONBOX_SATURATE_WORKERS of these loops, sharing `sizer` (SKIP LOCKED gives them disjoint
    jobs): while one computes in its thread, another's claim or store runs in the database.
    With `leases`, each pass claims from one held bucket, the next held bucket in `turns`
    (shared by the workers), and a loop sleeps once as many passes in a row as buckets held
    found nothing more to do."""
    health = health or LoopHealth("saturation", register=False)
    sizer = sizer or PassSizer(ps.saturate_hold, ps.saturate_batch)
    turns = turns or Turns()
    while not waker.stop.is_set():
        bucket, span = None, 1
        if leases is not None:
            held = leases.held()
            if not held:  # none yet, or the lease ran out: woken when a renewal grants some
                await waker.sleep(cfg.poll_interval.total_seconds())
                continue
            bucket, span = turns.next(held), len(held)
        asked = sizer.jobs()
        try:
            done = await _unless_stopped(lambda: saturate(pool, ps, backlog, sizer, bucket), "saturation", cfg, waker)
        except Exception as exc:
            await _failed(health, exc, waker, cfg)
            continue
        if done is None:
            return
        health.ok()
        if done.futures:
            dispatch_waker.wake.set()
        if done.deferred and not done.planned:
            # every job it claimed waits for dispatch's backlog: claiming them again at once
            # costs the database what dispatch needs to clear it (with a million schedules,
            # half the claims of a from-empty run); look again at the poll interval or when woken
            await waker.sleep(cfg.poll_interval.total_seconds())
        elif done.deferred and not done.cut:  # catch-up waits for dispatch's backlog: look again soon
            await waker.sleep(min(cfg.poll_interval.total_seconds(), 0.1))
        elif done.claimed < asked and not done.cut:
            if turns.idle(span):  # every held bucket (plain PostgreSQL: the one call) found no more
                await waker.sleep(cfg.poll_interval.total_seconds())
        else:
            turns.quiet = 0


async def run(cfg: Config, waker: Waker, settings: PollerSettings | None = None) -> None:
    ps = settings or PollerSettings.from_env()
    check_dispatch_lead(cfg.dispatch_lead, ps.horizon, "CRONBOX_HORIZON")
    name = identity("poller")
    event(log, "starting", process=name, **{**cfg.describe(), **ps.describe()})
    # dispatch, the fires-ahead profile, each saturation worker, reaper, maintenance, metrics and
    # the registry: one each
    pool = await db.open_pool(cfg.dsn, min_size=2, max_size=6 + ps.saturate_workers, name="poller")
    saturation = Waker()
    saturation.stop = waker.stop  # one stop for the process; a wake-up event per loop
    health = {n: LoopHealth(n) for n in ("dispatch", "saturation", "reaper", "maintenance")}
    backlog = Backlog()
    # on Citus: the buckets this poller holds (None on plain PostgreSQL: every bucket)
    leased = await db.retrying(lambda: leases_buckets(pool), budget=60, what="bucket leases", stop=waker.stop)
    leases = BucketLeases("poller", name, ps.bucket_lease) if leased else None
    registry = asyncio.create_task(keep_registered(pool, "poller", name, waker.stop), name="registry")
    held = [asyncio.create_task(keep_leased(pool, leases, waker.stop), name="bucket-leases"),
            asyncio.create_task(wake_on_change(leases, [waker.wake, saturation.wake], waker.stop),
                                name="bucket-lease-wakes")] if leases else []
    listen_dsn = listen_target(cfg.dsn, cfg.listen_dsn)
    side = [
        asyncio.create_task(listen(listen_dsn, ("cronbox_schedule", "cronbox_future"), waker,
                                   on_connect=saturation.wake.set, on_notify=saturation.wake.set),
                            name="listener"),
    ] if listen_dsn else []
    sizer = PassSizer(ps.saturate_hold, ps.saturate_batch, workers=ps.saturate_workers)
    turns = Turns()  # the saturation workers' shared turn over the held buckets
    side += [
        asyncio.create_task(saturate_loop(pool, cfg, ps, saturation, waker, health["saturation"], backlog, sizer,
                                          leases, turns),
                            name=f"saturation-{k}")
        for k in range(ps.saturate_workers)
    ] + [
        asyncio.create_task(reaper_loop(pool, waker, ps.reap_interval, health["reaper"]), name="reaper"),
        asyncio.create_task(maintenance_loop(pool, waker, ps.retention, MAINTENANCE_EVERY, health["maintenance"]),
                            name="maintenance"),
        asyncio.create_task(metrics.serve(cfg, pool, "poller", waker.stop, refresh=poller_metrics.refresh),
                            name="metrics"),
    ]
    try:
        await dispatch_loop(pool, cfg, ps, waker, health["dispatch"], backlog, leases)
    finally:
        # A clean stop deregisters: the registry task sees the stop and removes this process
        # from cronbox.processes itself; it is cancelled only if that takes too long.
        waker.stop.set()
        # and releases its buckets (keep_leased's own end), so the others take them at once
        with contextlib.suppress(Exception):
            await asyncio.wait({registry, *held}, timeout=5)
        await cancel_quietly(*side, registry, *held)
        for h in health.values():
            h.close()
        await pool.close()
        event(log, "stopped", process=name)
