"""The poller's dispatch loop: one tick (poller/tick.py) per transaction; again at once while
batches come back full (up to the per-wake-up cap, CRONBOX_DISPATCH_TICK_CAP); otherwise sleep
until the next due time (from the database clock), a NOTIFY (a schedule changed, futures were
written or released), or the poll interval (the backstop), whichever comes first. With bucket
leases each tick visits the held buckets, starting one further each time."""

from __future__ import annotations

import asyncio
import logging
import time

from cronbox import metrics
from cronbox.buckets import BucketLeases, Turns
from cronbox.config import Config
from cronbox.log import event
from cronbox.proc import Waker, cancel_quietly
from poller import store
from poller.health import LoopHealth
from poller.lead import LeadPlanner, profile_loop
from poller.rounds import failed, unless_stopped
from poller.settings import PollerSettings
from poller.sizing import Backlog, PassSizer
from poller.tick import EVERY_BUCKET, lead_planner, tick

# The time a dispatch batch aims to take (statement and commit): a longer one makes the next
# ones smaller, quick full ones grow them back up to CRONBOX_DISPATCH_BATCH.
DISPATCH_HOLD = 0.3

log = logging.getLogger("cronbox.poller")


async def dispatch_loop(pool, cfg: Config, ps: PollerSettings, waker: Waker,
                        health: LoopHealth | None = None, backlog: Backlog | None = None,
                        leases: BucketLeases | None = None) -> None:
    health = health or LoopHealth("dispatch", register=False)
    backlog = backlog or Backlog()
    planner = lead_planner(cfg, ps)
    # the fires coming due are read beside this loop, never inside a tick (poller/lead.py)
    profile = asyncio.create_task(profile_loop(pool, planner, waker.stop, leases.held if leases else None),
                                  name="dispatch-profile")
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
                t = await unless_stopped(lambda: tick(pool, cfg, ps, limit, planner, buckets, walks), "poller tick",
                                          cfg, waker)
            except Exception as exc:
                await failed(health, exc, waker, cfg)
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
