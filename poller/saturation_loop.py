"""The poller's saturation loop: passes (poller/saturate.py) in their own tasks
(CRONBOX_SATURATE_WORKERS, each on its own connection: one computes while another writes),
sized by time (CRONBOX_SATURATE_HOLD: PassSizer), computing fires in a worker thread in slices
(CRONBOX_SATURATE_SLICE), so a due fire never waits behind a saturation pass. A loop passes
again at once while batches come back full, wakes the dispatch loop when it wrote futures (the
next due time may have moved earlier), and otherwise sleeps until a NOTIFY or the poll interval.
With bucket leases each pass claims from one held bucket, the next pass from the next."""

from __future__ import annotations

import logging

from cronbox.buckets import BucketLeases, Turns, Unreached
from cronbox.config import Config
from cronbox.log import event
from cronbox.proc import Waker
from poller import metrics as poller_metrics
from poller.health import LoopHealth
from poller.rounds import failed, unless_stopped
from poller.saturate import Pass, saturate_pass
from poller.settings import PollerSettings
from poller.sizing import Backlog, PassSizer

log = logging.getLogger("cronbox.poller")


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
    unreached = Unreached("saturation")
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
            # a bucket whose worker node is unreachable: an empty pass, the next bucket's next
            done = await unless_stopped(lambda: unreached.call(bucket, lambda: saturate(pool, ps, backlog, sizer, bucket),
                                                               Pass()), "saturation", cfg, waker)
        except Exception as exc:
            await failed(health, exc, waker, cfg)
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
