"""`cronbox relay`: claim a batch of outbox rows (lease), send, ack in a second transaction.

At least once: a relay that dies between claim and ack leaves leased rows that any relay
claims again once the lease ends. Claims are serial (one round trip each); sending and
settling (one ack, at most one nack) of up to CRONBOX_RELAY_INFLIGHT batches overlap. The
relay wakes on NOTIFY cronbox_outbox and polls as a backstop (and after every reconnect of
the listener). SIGTERM: stop claiming, finish in-flight sends, hand back unfinished leases,
deregister, exit 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections import defaultdict

import aiohttp
import psycopg

from cronbox import db, metrics
from cronbox.config import Config, ConfigError
from cronbox.log import event
from cronbox.proc import Waker, identity, listen
from cronbox.registry import keep_registered
from relay import store
from relay.routes import Routes, parse_routes
from relay.settings import RelaySettings
from relay.sinks import Report, Row, deliver

log = logging.getLogger("cronbox.relay")
SETTLE_BUDGET = 600.0  # keep retrying an ack this long; after that the lease brings rows back


async def retrying(op, *, budget: float, what: str):
    """db.retrying, without building a tenacity loop per call on the happy path."""
    try:
        return await op()
    except (psycopg.OperationalError, psycopg.InterfaceError):
        return await db.retrying(op, budget=budget, what=what)


async def check_routes(pool, routes: Routes) -> None:
    """Unrouted queues are an error at start, never a silent drop."""
    missing = routes.unrouted(await db.retrying(lambda: store.known_queues(pool), budget=60, what="queues"))
    if missing:
        raise ConfigError(
            f"CRONBOX_SINKS: queue(s) {', '.join(repr(q) for q in missing)} have no route; add "
            f"`{missing[0]}=<url|log|postgres|elsewhere>` or a default `*=...`")


async def watch_unrouted(pool, routes: Routes, waker: Waker, every: float) -> None:
    """Queues that appear later with no route: their messages stay in the outbox; say so loudly."""
    while not waker.stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(waker.stop.wait(), every)
        try:
            for queue, n in await store.unrouted_in_outbox(pool, routes):
                event(log, "queue has no route: its messages wait in the outbox", level=logging.ERROR,
                      queue=queue, messages=n, hint="add it to CRONBOX_SINKS (or `elsewhere`)")
        except Exception as exc:  # a check must never stop delivery
            event(log, "unrouted check failed", level=logging.WARNING, error=db.explain(exc))


class Relay:
    """One relay process: the claim loop plus the batches in flight."""

    def __init__(self, cfg: Config, s: RelaySettings, routes: Routes, pool, session: aiohttp.ClientSession,
                 owner: str, waker: Waker):
        self.cfg, self.s, self.routes, self.pool, self.session = cfg, s, routes, pool, session
        self.owner, self.waker = owner, waker
        self.include, self.exclude = routes.claim_filter()
        self.slots = asyncio.Semaphore(s.inflight)
        self.inflight: set[asyncio.Task[None]] = set()

    async def claim(self) -> list[Row]:
        """One claim, retried while PostgreSQL is away, abandoned on stop (the final release
        sweep hands back anything a cancelled claim may have leased)."""
        claim = asyncio.ensure_future(retrying(
            lambda: store.claim_outbox(self.pool, self.owner, self.cfg.relay_batch, self.cfg.relay_lease,
                                       self.include, self.exclude, self.cfg.dispatch_lead),
            budget=3600, what="relay claim"))
        stop = asyncio.ensure_future(self.waker.stop.wait())
        try:
            await asyncio.wait({claim, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            if not claim.done():
                claim.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await claim
        return [] if claim.cancelled() else claim.result()

    async def loop(self) -> None:
        while not self.waker.stop.is_set():
            await self.slots.acquire()
            if self.waker.stop.is_set():
                self.slots.release()
                break
            try:
                rows = await self.claim()
            except BaseException:
                self.slots.release()
                raise
            metrics.tick("relay")
            if rows:
                task = asyncio.create_task(self.send(rows))
                self.inflight.add(task)
                task.add_done_callback(self._done)
            else:
                self.slots.release()
            if len(rows) < self.cfg.relay_batch:
                await self.waker.sleep(self.cfg.poll_interval.total_seconds(), jitter=0.2)

    def _done(self, task: asyncio.Task[None]) -> None:
        self.inflight.discard(task)
        self.slots.release()
        if not task.cancelled() and task.exception() is not None:
            event(log, "batch failed", level=logging.ERROR, error=db.explain(task.exception()))

    async def deliver_on_time(self, rows: list[Row], report: Report) -> float:
        """Send the rows, those claimed ahead (CRONBOX_DISPATCH_LEAD) at their due time: rows
        due together go out together, each group as soon as its time comes. Returns the send
        time in seconds, from the first group's due time."""
        t0 = time.monotonic()
        if not any(r[5] > t0 for r in rows):
            await deliver(self.session, self.routes, rows, report)
            return time.monotonic() - t0
        groups: dict[float, list[Row]] = defaultdict(list)
        for r in rows:
            groups[round(max(r[5], t0), 3)].append(r)

        async def at(send_at: float, group: list[Row]) -> None:
            await asyncio.sleep(max(0.0, send_at - time.monotonic()))
            await deliver(self.session, self.routes, group, report)

        await asyncio.gather(*(at(send_at, group) for send_at, group in sorted(groups.items())))
        return max(0.0, time.monotonic() - min(groups))

    def sink_of(self, queue: str) -> str | None:
        route = self.routes.target(queue)
        return route.kind if route else None

    async def send(self, rows: list[Row]) -> None:
        report = Report()
        try:
            seconds = await self.deliver_on_time(rows, report)
        except asyncio.CancelledError:
            # Shutdown timeout: settle the sends that finished, hand back the rest (maybe sent:
            # at least once).
            done = set(report.ok) | set(report.failed)
            unsent = [r[0] for r in rows if r[0] not in done]
            with contextlib.suppress(Exception):
                await asyncio.shield(self._settle_and_release(report, unsent))
            raise
        dead = await self.settle(report)
        metrics.observe_relay_batch(rows, set(report.ok), dead, self.sink_of, seconds)

    async def _settle_and_release(self, report: Report, unsent: list[int]) -> None:
        await self.settle(report)
        if unsent:
            await self._release(unsent)

    async def _release(self, ids: list[int] | None) -> int:
        return await db.retrying(lambda: store.release_outbox(self.pool, self.owner, ids, self.cfg.relay_lease), budget=5, what="release")

    async def settle(self, report: Report) -> set[int]:
        """Ack what was delivered, nack what failed; returns the dead-lettered outbox ids."""
        if report.ok:
            await retrying(lambda: store.ack_outbox(self.pool, self.owner, report),
                              budget=SETTLE_BUDGET, what="relay ack")
        if report.failed:
            retried, dead = await retrying(lambda: store.nack_outbox(self.pool, self.owner, report, self.s),
                                              budget=SETTLE_BUDGET, what="relay nack")
            event(log, "sends failed", level=logging.ERROR if dead else logging.WARNING,
                  failed=len(report.failed), retried=retried, dead_lettered=len(dead), first_error=report.errors[0])
            return set(dead)
        return set()

    async def drain(self) -> None:
        """Finish in-flight sends within the shutdown timeout, then hand back what is left."""
        if self.inflight:
            _, pending = await asyncio.wait(set(self.inflight), timeout=self.cfg.shutdown_timeout.total_seconds())
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        with contextlib.suppress(Exception):
            released = await self._release(None)
            if released:
                event(log, "released leases", process=self.owner, rows=released)


async def run(cfg: Config, waker: Waker, settings: RelaySettings | None = None) -> None:
    s = settings or RelaySettings.from_env()
    routes = parse_routes(cfg.sinks or "*=log", os.environ)
    owner = identity("relay")
    event(log, "starting", process=owner, **{**cfg.describe(), **s.describe(), "sinks": routes.describe()})
    if cfg.relay_lease.total_seconds() <= s.http_timeout:
        event(log, "lease is not longer than the HTTP timeout: slow sends will be sent twice",
              level=logging.WARNING, lease=cfg.relay_lease.total_seconds(), http_timeout=s.http_timeout)
    pool = await db.open_pool(cfg.dsn, min_size=1, max_size=s.inflight + 3, name="relay")
    try:
        await check_routes(pool, routes)
        timeout = aiohttp.ClientTimeout(total=s.http_timeout, connect=s.http_connect_timeout)
        connector = aiohttp.TCPConnector(limit=s.http_connections)
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
            relay = Relay(cfg, s, routes, pool, session, owner, waker)
            async with asyncio.TaskGroup() as side:
                side.create_task(listen(cfg.dsn, ("cronbox_outbox",), waker), name="listener")
                side.create_task(keep_registered(pool, "relay", owner, waker.stop,
                                                 info={"sinks": routes.describe()}), name="registry")
                side.create_task(watch_unrouted(pool, routes, waker, s.check_every), name="unrouted")
                side.create_task(metrics.serve(cfg, pool, "relay", waker.stop), name="metrics")
                try:
                    await relay.loop()
                finally:
                    waker.stop.set()
                    await relay.drain()
    finally:
        await pool.close()
        event(log, "stopped", process=owner)
