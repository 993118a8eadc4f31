"""`cronbox poller`: the saturation + dispatch loop, with the reaper and maintenance on the side.

Any number of pollers may run against one database: saturation and dispatch both claim with
SKIP LOCKED, so correctness never depends on there being one.

The loop: one saturation pass and one `cronbox.dispatch` call per tick; again at once while
batches come back full (up to the per-wake-up cap, CRONBOX_DISPATCH_TICK_CAP); otherwise sleep
until the next due time (from the database clock), a NOTIFY (a schedule changed, futures were
written or released), or the poll interval (the backstop), whichever comes first.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging

import psycopg

from cronbox import db, metrics
from cronbox.config import Config
from cronbox.log import event
from cronbox.proc import Waker, cancel_quietly, identity, listen
from cronbox.registry import keep_registered
from poller.maintenance import maintenance_loop, reaper_loop
from poller.saturate import saturate_once

log = logging.getLogger("cronbox.poller")

MAINTENANCE_EVERY = 60.0
# Due futures exist but none could be taken (their jobs are locked by a worker reporting or
# by schedule()): look again soon rather than at once.
BUSY_RETRY = 0.02


@dataclasses.dataclass
class Tick:
    again: bool          # a batch came back full: go again at once
    sleep: float         # otherwise sleep this long (seconds)
    dispatched: int


async def tick(pool, cfg: Config, limit: int) -> Tick:
    """One dispatch batch of at most `limit` futures, then one saturation pass. Dispatch goes
    first so a due fire never waits behind saturation work; if saturation wrote futures, the
    next due time may have moved earlier, so the loop goes again at once."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT dispatched, skipped, failed, held, "
            "       extract(epoch FROM next_due - clock_timestamp()) "
            "FROM cronbox.dispatch(%s)", (limit,))
        dispatched, skipped, failed, held, wait = await cur.fetchone()
        claimed, futures, missed = await saturate_once(
            conn, batch=cfg.saturate_batch, horizon=cfg.horizon, grace=cfg.misfire_grace)
        metrics.observe_saturation(futures)
        if claimed:
            event(log, "saturated", level=logging.DEBUG, jobs=claimed, futures=futures, missed=missed)
    decided = dispatched + skipped + failed + held
    if decided:
        event(log, "dispatched", level=logging.DEBUG, runs=dispatched, skipped=skipped,
              failed=failed, held=held)
    again = claimed >= cfg.saturate_batch or decided >= limit or futures > 0
    sleep = cfg.poll_interval.total_seconds()
    if wait is not None:
        sleep = min(sleep, float(wait))
        if sleep <= 0:
            sleep = BUSY_RETRY
    return Tick(again=again, sleep=sleep, dispatched=dispatched)


async def _tick_unless_stopped(pool, cfg: Config, limit: int, waker: Waker) -> Tick | None:
    """One tick, retried while the database is away. On SIGTERM an in-flight tick gets the
    shutdown timeout to finish; one still waiting for the database then is cancelled (its
    transaction rolls back: nothing half-done). None = stop now."""
    work = asyncio.ensure_future(db.retrying(lambda: tick(pool, cfg, limit), budget=3600,
                                             what="poller tick", stop=waker.stop))
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


async def dispatch_loop(pool, cfg: Config, waker: Waker) -> None:
    cap = cfg.dispatch_tick_cap
    while not waker.stop.is_set():
        budget = cap
        while not waker.stop.is_set():
            limit = cfg.dispatch_batch if cap == 0 else max(1, min(cfg.dispatch_batch, budget))
            t = await _tick_unless_stopped(pool, cfg, limit, waker)
            if t is None:
                return
            metrics.tick("poller")
            budget -= t.dispatched
            if cap and budget <= 0:
                # Capped: the rest waits for the next round, one poll interval away.
                event(log, "dispatch cap reached", level=logging.DEBUG, cap=cap)
                await waker.sleep(cfg.poll_interval.total_seconds())
                break
            if not t.again:
                await waker.sleep(t.sleep)
                break


async def run(cfg: Config, waker: Waker) -> None:
    name = identity("poller")
    event(log, "starting", process=name, **cfg.describe())
    pool = await db.open_pool(cfg.dsn, min_size=1, max_size=4, name="poller")
    side = [
        asyncio.create_task(listen(cfg.dsn, ("cronbox_schedule", "cronbox_future"), waker), name="listener"),
        asyncio.create_task(reaper_loop(pool, waker, cfg.reap_interval), name="reaper"),
        asyncio.create_task(maintenance_loop(pool, waker, cfg.retention, MAINTENANCE_EVERY), name="maintenance"),
        asyncio.create_task(metrics.serve(cfg, pool, "poller", waker.stop), name="metrics"),
        asyncio.create_task(keep_registered(pool, "poller", name, waker.stop), name="registry"),
    ]
    try:
        await dispatch_loop(pool, cfg, waker)
    finally:
        await cancel_quietly(*side)
        await pool.close()
        event(log, "stopped", process=name)
