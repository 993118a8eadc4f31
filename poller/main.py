"""`cronbox poller`: the dispatch loop and the saturation loop, with the reaper and maintenance
on the side.

Any number of pollers may run against one database: saturation and dispatch both claim with
SKIP LOCKED, so correctness never depends on there being one.

- poller/dispatch_loop.py: the dispatch loop, one tick (poller/tick.py: dispatch, then early
  dispatch) per transaction, sleeping until the next due time, a NOTIFY or the poll interval;
- poller/saturation_loop.py: CRONBOX_SATURATE_WORKERS saturation loops, each pass sized by time
  (poller/sizing.py) and computed in a worker thread, so a due fire never waits behind one;
- poller/leasing.py: on a database with the Citus layer (`cronbox migrate --citus`), the buckets
  this poller holds (shared among the pollers with no leader), which both loops work one by one;
  on plain PostgreSQL none of this runs: one call over every bucket;
- poller/maintenance.py: the reaper and maintenance rounds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from cronbox import db, metrics
from cronbox.buckets import Turns
from cronbox.config import Config, check_dispatch_lead, listen_target
from cronbox.log import event
from cronbox.proc import Waker, cancel_quietly, identity, listen
from cronbox.registry import keep_registered
from poller import metrics as poller_metrics
from poller.dispatch_loop import dispatch_loop
from poller.health import LoopHealth
from poller.leasing import start_leasing
from poller.maintenance import maintenance_loop, reaper_loop
from poller.saturation_loop import saturate_loop
from poller.settings import PollerSettings
from poller.sizing import Backlog, PassSizer

log = logging.getLogger("cronbox.poller")

MAINTENANCE_EVERY = 60.0


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
    leases, held = await start_leasing(pool, name, ps, [waker.wake, saturation.wake], waker.stop)
    registry = asyncio.create_task(keep_registered(pool, "poller", name, waker.stop), name="registry")
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
        asyncio.create_task(reaper_loop(pool, waker, ps.reap_interval, health["reaper"],
                                        leases.held if leases else None), name="reaper"),
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
