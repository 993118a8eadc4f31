"""`cronbox poller`: the saturation + dispatch loop, with maintenance on the side.

Any number of pollers may run against one database: saturation and dispatch both claim with
SKIP LOCKED, so correctness never depends on there being one.
"""

from __future__ import annotations

import asyncio
import logging

from cronbox import db, metrics
from cronbox.config import Config
from cronbox.log import event
from cronbox.proc import Waker, cancel_quietly, identity, listen
from cronbox.registry import keep_registered
from poller.saturate import saturate_once

log = logging.getLogger("cronbox.poller")

MAINTENANCE_EVERY = 3600.0


async def _maintenance(pool, waker: Waker) -> None:
    while not waker.stop.is_set():
        async def once() -> None:
            async with pool.connection() as conn:
                await conn.execute("SELECT cronbox.ensure_run_partitions()")
        try:
            await db.retrying(once, budget=60, what="maintenance")
        except Exception as exc:  # maintenance must never stop dispatching
            event(log, "maintenance failed", level=logging.ERROR, error=db.explain(exc))
        await asyncio.wait({asyncio.ensure_future(waker.stop.wait())}, timeout=MAINTENANCE_EVERY)


async def tick(pool, cfg: Config) -> tuple[bool, float]:
    """One saturation pass and one dispatch batch. Returns (go again now?, seconds to sleep)."""
    async with pool.connection() as conn:
        claimed, futures, missed = await saturate_once(
            conn, batch=cfg.saturate_batch, horizon=cfg.horizon, grace=cfg.misfire_grace)
        metrics.observe_saturation(futures)
        if claimed:
            event(log, "saturated", level=logging.DEBUG, jobs=claimed, futures=futures, missed=missed)
        cur = await conn.execute(
            "SELECT dispatched, next_due, extract(epoch FROM next_due - clock_timestamp()) "
            "FROM cronbox.dispatch(%s)", (cfg.dispatch_batch,))
        dispatched, next_due, wait = await cur.fetchone()
        if dispatched:
            event(log, "dispatched", level=logging.DEBUG, runs=dispatched)
    again = claimed >= cfg.saturate_batch or dispatched >= cfg.dispatch_batch
    sleep = cfg.poll_interval.total_seconds()
    if wait is not None:
        sleep = max(0.0, min(sleep, float(wait)))
    return again, sleep


async def run(cfg: Config, waker: Waker) -> None:
    name = identity("poller")
    event(log, "starting", process=name, **cfg.describe())
    pool = await db.open_pool(cfg.dsn, min_size=1, max_size=3, name="poller")
    side = [
        asyncio.create_task(listen(cfg.dsn, ("cronbox_schedule",), waker), name="listener"),
        asyncio.create_task(_maintenance(pool, waker), name="maintenance"),
        asyncio.create_task(metrics.serve(cfg, pool, "poller", waker.stop), name="metrics"),
        asyncio.create_task(keep_registered(pool, "poller", name, waker.stop), name="registry"),
    ]
    try:
        while not waker.stop.is_set():
            again, sleep = await db.retrying(lambda: tick(pool, cfg), budget=3600, what="poller tick")
            metrics.tick("poller")
            if not again:
                await waker.sleep(sleep)
    finally:
        await cancel_quietly(*side)
        await pool.close()
        event(log, "stopped", process=name)
