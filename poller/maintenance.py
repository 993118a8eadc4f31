"""The poller's side loops: the reaper (leases, held-future backstop, job statistics folded, pauses
whose until passed, backfill requests) and history maintenance.

Both are plain SQL calls on a timer; any number of pollers may run them at once (the reaper
re-checks every run under lock, partition maintenance takes an advisory lock). A failure is
logged and retried on the next round: side loops never stop dispatching.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import timedelta

from cronbox import db
from cronbox.buckets import Unreached
from cronbox.log import event
from cronbox.proc import Waker
from poller import backfill, metrics, store
from poller.health import LoopHealth

log = logging.getLogger("cronbox.poller")

REAP_BATCH = 1000
RELEASE_BATCH = 10000
RESUME_BATCH = 1000
BACKFILL_PASSES = 10  # per reaper round: at most 10 x 10 requests
PARTITIONS_AHEAD_DAYS = 7
FOLD_BATCH = 10_000  # statistics change rows (one per dispatch or finishing call) per fold
FOLD_ROUNDS = 10  # per reaper round; the rest waits for the next round
# Runs per tally call and schedule names per sync call: each call is its own transaction, kept
# well under a second on a loaded 2-core machine (100,000 runs took 5 s at load 13, a million
# names in one call 64 s); calls repeat while they come back full, up to the rounds below, the
# rest waits a minute.
TALLY_BATCH = 20_000
TALLY_ROUNDS = 100
SYNC_BATCH = 5_000
SYNC_ROUNDS = 40  # a million new schedules are searchable by name within five minutes


EVERY_BUCKET: tuple[int | None, ...] = (None,)  # plain PostgreSQL: one call over every bucket
# the held buckets whose worker node could not be reached: passed over, the others maintained
UNREACHED = Unreached("maintenance")


async def reap_once(pool, buckets: Sequence[int | None] = EVERY_BUCKET) -> tuple[int, int]:
    """Declare expired leases lost (retrying per policy), give held futures their second look, and
    fold the job statistics dispatch and the reports left off the hot path (every view shows
    them a round later: docs/architecture.md, "Statistics off the hot path"). `buckets`: the
    leases, holds and statistics looked at, bucket by bucket (a poller leasing buckets: those it
    holds); by default one call over every bucket."""
    lost = released = 0
    async with pool.connection() as conn:
        for bucket in buckets:
            while True:
                n = await UNREACHED.call(bucket, lambda: store.reap_lost(conn, REAP_BATCH, bucket), 0)
                lost += n
                if n < REAP_BATCH:
                    break
        for bucket in buckets:
            released += await UNREACHED.call(bucket, lambda: store.release_holds(conn, RELEASE_BATCH, bucket), 0)
        for bucket in buckets:
            for _ in range(FOLD_ROUNDS):
                if await UNREACHED.call(bucket, lambda: store.fold_job_stats(conn, FOLD_BATCH, bucket), 0) < FOLD_BATCH:
                    break
    return lost, released


async def schedule_ops_once(pool, buckets: Sequence[int | None] = EVERY_BUCKET) -> tuple[int, int]:
    """End pauses whose until has passed (cronbox.resume_paused) and materialise backfill
    requests (poller/backfill.py): (jobs resumed, backfilled futures made). `buckets`: bucket by
    bucket, each its resumes and backfill passes (a poller leasing buckets: those it holds); by
    default one call over every bucket."""
    made = resumed = 0
    async with pool.connection() as conn:
        for bucket in buckets:
            resumed += await UNREACHED.call(bucket, lambda: store.resume_paused(conn, RESUME_BATCH, bucket=bucket), 0)
        for bucket in buckets:
            for _ in range(BACKFILL_PASSES):
                claimed, n, _dups = await UNREACHED.call(bucket, lambda: backfill.backfill_once(conn, bucket=bucket),
                                                         (0, 0, 0))
                made += n
                if claimed < backfill.BATCH or n == 0:
                    break
    return resumed, made


async def maintain_once(pool, retention: timedelta) -> list[str]:
    """Partitions ahead, partitions past retention dropped, queue limit and pool counters recounted,
    and for the web console: the name search's side table brought in step, and finished runs
    counted per minute for the overview (cronbox.tally_runs reads the runs created since its
    last call once, off the dispatch and completion path)."""
    async with pool.connection() as conn:
        await store.ensure_run_partitions(conn, PARTITIONS_AHEAD_DAYS)
        dropped = await store.drop_run_partitions(conn, retention)
        await store.reconcile_queue_limits(conn)
        await store.reconcile_pools(conn)
        for _ in range(SYNC_ROUNDS):
            if await store.sync_schedule_names(conn, SYNC_BATCH) < SYNC_BATCH:
                break
        for _ in range(TALLY_ROUNDS):
            if await store.tally_runs(conn, TALLY_BATCH) < TALLY_BATCH:
                break
    return dropped


async def reaper_loop(pool, waker: Waker, every: timedelta, health: LoopHealth | None = None,
                      held: Callable[[], Sequence[int]] | None = None) -> None:
    """`held`: the buckets this poller holds, read each round (a poller leasing buckets); None:
    every bucket."""
    health = health or LoopHealth("reaper", register=False)
    while not waker.stop.is_set():
        buckets = EVERY_BUCKET if held is None else held()
        try:
            lost, released = await db.retrying(lambda: reap_once(pool, buckets), budget=60, what="reaper")
            metrics.observe_reaped(lost)
            if lost or released:
                event(log, "reaped", lost=lost, holds_released=released)
            resumed, backfilled = await db.retrying(lambda: schedule_ops_once(pool, buckets), budget=60, what="reaper")
            if resumed or backfilled:
                event(log, "schedule operations", resumed=resumed, backfilled=backfilled)
            health.ok()
        except Exception as exc:  # the reaper must never stop dispatching
            health.failed(db.explain(exc))
            event(log, "reaper failed", level=logging.ERROR, error=db.explain(exc))
        await _sleep(waker, every.total_seconds())


async def maintenance_loop(pool, waker: Waker, retention: timedelta, every: float,
                           health: LoopHealth | None = None) -> None:
    health = health or LoopHealth("maintenance", register=False)
    while not waker.stop.is_set():
        try:
            dropped = await db.retrying(lambda: maintain_once(pool, retention), budget=60, what="maintenance")
            if dropped:
                event(log, "history partitions dropped", partitions=",".join(dropped),
                      retention=f"{retention.total_seconds():g}s")
            health.ok()
        except Exception as exc:
            health.failed(db.explain(exc))
            event(log, "maintenance failed", level=logging.ERROR, error=db.explain(exc))
        await _sleep(waker, every)


async def _sleep(waker: Waker, seconds: float) -> None:
    """Sleep that only the stop event interrupts (the wake event belongs to the dispatch loop)."""
    stop = asyncio.ensure_future(waker.stop.wait())
    try:
        await asyncio.wait({stop}, timeout=seconds)
    finally:
        stop.cancel()
