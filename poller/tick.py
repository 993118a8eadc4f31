"""One dispatch tick of the poller (the dispatch loop, poller/dispatch_loop.py, runs them): a
`cronbox.dispatch` batch, then early dispatch of what is due within the lead, one call per bucket
in turn when the poller leases buckets (one call over every bucket on plain PostgreSQL). A batch
that fails is bisected so that only the job(s) at fault are quarantined."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence

from cronbox import db
from cronbox.buckets import Unreached
from cronbox.config import Config
from cronbox.log import event
from poller import store
from poller.lead import LeadPlanner
from poller.quarantine import CONNECTION_ERRORS, describe, isolate, quarantine
from poller.settings import PollerSettings

log = logging.getLogger("cronbox.poller")

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
        jobs = await store.due_jobs(conn, limit, bucket)

        async def run(subset):
            return await store.dispatch(conn, limit, subset, grace, bucket)

        done, bad = await isolate(conn, jobs, run, cause)
        for job_id, error in bad:
            await quarantine(conn, job_id, f"cannot dispatch: {error}", "dispatch", bucket)
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
# the held buckets whose worker node could not be reached: passed over, the others dispatched
UNREACHED = Unreached("dispatch")


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
        async def batch(bucket: int | None, asked: int) -> store.Dispatched:
            try:
                return await store.dispatch(conn, asked, None, grace, bucket)
            except CONNECTION_ERRORS:
                raise
            except Exception as exc:
                if db.node_unreachable(exc):  # a Citus worker node lost: no job is at fault
                    raise
                return await _dispatch_isolating(conn, asked, grace, exc, bucket)

        async def one(bucket: int | None, asked: int) -> int:
            nonlocal dispatched, skipped, failed, held, decided
            d = await UNREACHED.call(bucket, lambda: batch(bucket, asked), None)
            if d is None:  # its worker node unreachable: the other buckets go on
                return 0
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
                    ahead = await UNREACHED.call(
                        bucket, lambda: store.dispatch_ahead(conn, room - early, lead, walked, bucket), None)
                    if ahead is None:
                        continue
                    e, b, wait, behind, walked = ahead
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

