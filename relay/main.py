"""`cronbox relay`: claim a batch of outbox rows (lease), send, ack in a second transaction.

At least once: a relay that dies between claim and ack leaves leased rows that any relay
claims again once the lease ends. The relay wakes on NOTIFY cronbox_outbox and polls as a
backstop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict

import aiohttp

from cronbox import db, metrics
from cronbox.config import Config
from cronbox.log import event
from cronbox.proc import Waker, cancel_quietly, identity, listen
from relay.sinks import Outcome, Routes, parse_routes, send_http, send_log

log = logging.getLogger("cronbox.relay")


async def deliver(session: aiohttp.ClientSession, routes: Routes, rows: list[tuple]) -> list[tuple[int, Outcome]]:
    by_target: dict[str, list[tuple]] = defaultdict(list)
    for row in rows:
        by_target[routes.target(row[2]) or "unrouted"].append(row)
    results: list[tuple[int, Outcome]] = []
    for target, group in by_target.items():
        if target == "log":
            outs = await send_log([r[4] for r in group])
        elif target.startswith("http"):
            outs = await asyncio.gather(*(send_http(session, target, r[4]) for r in group))
        else:
            outs = [Outcome(False, f"no sink for queue {r[2]!r}") for r in group]
        results += [(r[0], o) for r, o in zip(group, outs, strict=True)]
    return results


async def tick(pool, cfg: Config, routes: Routes, session: aiohttp.ClientSession, owner: str) -> int:
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT outbox_id, run_id, queue, kind, message, attempts "
            "FROM cronbox.claim_outbox(%s, %s, %s, %s)",
            (owner, cfg.relay_batch, cfg.relay_lease, routes.pushed_queues()))
        rows = await cur.fetchall()
    if not rows:
        return 0
    started = time.monotonic()
    results = await deliver(session, routes, rows)
    metrics.observe_relay_batch(rows, results, routes.target, time.monotonic() - started)
    ok = [oid for oid, o in results if o.ok]
    for oid, o in results:
        if not o.ok:
            event(log, "send failed", level=logging.WARNING, outbox_id=oid, error=o.error)
    if ok:
        async with pool.connection() as conn:
            await conn.execute("SELECT cronbox.ack_outbox(%s, %s)", (owner, ok))
    return len(rows)


async def run(cfg: Config, waker: Waker) -> None:
    routes = parse_routes(cfg.sinks or "*=log")
    owner = identity("relay")
    event(log, "starting", process=owner, **cfg.describe())
    pool = await db.open_pool(cfg.dsn, min_size=1, max_size=3, name="relay")
    listener = asyncio.create_task(listen(cfg.dsn, ("cronbox_outbox",), waker), name="listener")
    metrics_task = asyncio.create_task(metrics.serve(cfg, pool, "relay", waker.stop), name="metrics")
    timeout = aiohttp.ClientTimeout(total=30, connect=5)
    try:
        async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=64)) as session:
            while not waker.stop.is_set():
                n = await db.retrying(lambda: tick(pool, cfg, routes, session, owner), budget=3600, what="relay tick")
                metrics.tick("relay")
                if n < cfg.relay_batch:
                    await waker.sleep(cfg.poll_interval.total_seconds(), jitter=0.2)
    finally:
        await cancel_quietly(listener, metrics_task)
        await pool.close()
        event(log, "stopped", process=owner)
