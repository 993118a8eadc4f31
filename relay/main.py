"""`cronbox relay`: claim a batch of outbox rows (lease), send, ack in a second transaction.

At least once: a relay that dies between claim and ack leaves leased rows that any relay
claims again once the lease ends. Claims are serial (one round trip each); each claimed batch
is split per queue and each queue's share is sent and settled (one ack, at most one nack) by
its lane (relay/lanes.py): per queue up to CRONBOX_RELAY_INFLIGHT batches in flight, its own
connections, timeouts and circuit breaker, so one slow queue never delays another. The relay
wakes on NOTIFY cronbox_outbox and polls as a backstop (and after every reconnect of the
listener). SIGTERM: stop claiming, finish in-flight sends, hand back unfinished leases,
deregister, exit 0. The claims are relay/claims.py's, the acks and nacks relay/settle.py's.

On a database with the Citus layer (`cronbox migrate --citus`), the relays share the buckets
with no leader (cronbox/buckets.py, docs/citus.md "No leader"): each renews its lease on its
share (side task `keep_leased`, every third of CRONBOX_RELAY_BUCKET_LEASE; a renewal that
changes them wakes the loop, `wake_on_change`), claims from the buckets it holds only, one claim
per bucket in turn (`Turns`), settles each bucket's rows with their bucket, and releases its
buckets on SIGTERM. On plain PostgreSQL none of this happens: one claim over
every bucket, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import time
from collections import defaultdict

from cronbox import db, metrics
from cronbox.buckets import BucketLeases, keep_leased, leases_buckets, wake_on_change
from cronbox.config import Config, check_dispatch_lead, listen_target
from cronbox.log import event
from cronbox.proc import Supervisor, Waker, identity, listen, pause
from cronbox.registry import keep_registered
from relay import metrics as relay_metrics, store
from relay.checks import NAMED_EVERY, check_routes, watch_named, watch_unrouted
from relay.claims import Claimer
from relay.lanes import Departure, Lane
from relay.routes import OWN_ROUTE_QUEUES, Routes, parse_routes
from relay.settings import RelaySettings
from relay.settle import Settler
from relay.sinks import Report, Row

log = logging.getLogger("cronbox.relay")


class Relay:
    """One relay process: the claim loop, and per queue a lane (relay/lanes.py) sending what
    was claimed. A claim takes rows of every queue whose lane has room and whose breaker is
    closed; the rows are split per queue and each queue's share is sent and settled by a task
    of its own, so the claim loop never waits for a send, and a slow queue only fills its own
    lane (then it is left out of the claims until its lane has room again)."""

    def __init__(self, cfg: Config, s: RelaySettings, routes: Routes, pool, owner: str, waker: Waker,
                 tasks: Supervisor, leases: BucketLeases | None = None):
        self.cfg, self.s, self.routes, self.pool = cfg, s, routes, pool
        self.leases = leases           # on Citus: the buckets this relay holds (None: every bucket)
        self.owner, self.waker, self.tasks = owner, waker, tasks
        self.claims = Claimer(cfg, s, pool, owner, waker.stop, leases)
        self.settler = Settler(pool, owner, s)
        self.lanes: dict[str, Lane] = {}
        self.freed: set[str] = set()   # lanes that got room back since the last claim
        self.room = asyncio.Event()    # set with `freed`
        self.lease = s.lease.total_seconds()
        self.max_result = 1048576      # cronbox.max_result_bytes, read at start (run())
        self.yielded: set[str] = set()  # own queues another live relay names (watch_named)
        self.routes_checked = asyncio.Event()  # watch_named looked once (the loop waits for it, 5 s at most)

    def lane(self, queue: str) -> Lane | None:
        lane = self.lanes.get(queue)
        if lane is None:
            route = self.routes.target(queue)
            if route is None or not route.push:
                return None
            lane = self.lanes[queue] = Lane(queue, route, self.s, self.s.batch, self.lease, self.max_result)
        return lane

    def hand_out(self, rows: list[Row], probe: bool = False) -> None:
        """Split claimed rows per queue; each queue's share goes to its lane as one task."""
        claimed_at = time.monotonic()
        by_queue: dict[str, list[Row]] = defaultdict(list)
        worn = [r for r in rows if r.claims > self.s.max_attempts]
        if worn:
            self.tasks.spawn(self.settler.worn(worn), name="worn", child=True)
            rows = [r for r in rows if r.claims <= self.s.max_attempts]
            if probe and not rows and worn[0].queue in self.lanes:  # the probe's one row: probe again
                self.lanes[worn[0].queue].breaker.no_probe_row()
        for r in rows:
            by_queue[r.queue].append(r)
        for queue, group in by_queue.items():
            lane = self.lane(queue)
            if lane is None:  # claim_outbox filters these out; here only if routes changed under us
                self.tasks.spawn(self.settler.unroutable(group), name=f"unroutable:{queue}", child=True)
                continue
            lane.rows += len(group)
            for departure, part in lane.board(group, merge=not probe):
                self.tasks.spawn(self.send(lane, part, claimed_at, probe, departure), name=f"send:{queue}", child=True)

    async def loop(self) -> None:
        if any(q not in self.routes.by_queue for q in OWN_ROUTE_QUEUES):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.routes_checked.wait(), NAMED_EVERY)
        if self.leases is not None and self.leases.last is None:
            # the first renewal, before the first claim (one third of a lease at most)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.leases.changed.wait(), self.leases.renew_every)
        batch, poll = self.s.batch, self.cfg.poll_interval.total_seconds()
        general, last_general = True, 0.0
        while not self.waker.stop.is_set():
            again = False
            if general:
                # Every queue with room, minus those whose lanes are full or breakers open.
                include, exclude = self.routes.claim_filter(
                    [q for q, lane in self.lanes.items() if lane.blocked] + sorted(self.yielded))
                last_general = time.monotonic()
                if include is None or include:
                    rows = await self.claims.claim(batch, include, exclude)
                    self.hand_out(rows)
                    again = len(rows) >= batch
            freed = sorted(q for q in self.freed if not self.lanes[q].blocked and q not in self.yielded)
            self.freed.clear()
            self.room.clear()
            if freed and not self.waker.stop.is_set():
                # Lanes that just got room back: claim for them alone (cheap on the index, and
                # no scan past the rows of queues that are still blocked).
                limit = min(batch, sum(self.lanes[q].room() for q in freed))
                rows = await self.claims.claim(limit, freed, None)
                self.hand_out(rows)
                if len(rows) >= limit:
                    self.freed.update(q for q in freed if not self.lanes[q].blocked)
            await self.probe()
            metrics.tick("relay")
            if again or self.freed:
                general = again
                continue
            # With a lead, claim again within half of it: runs the poller wrote further ahead
            # (its lead grows before a burst, poller/lead.py) come within this relay's lead with
            # no NOTIFY, and are then held and sent at their time.
            lead = self.cfg.dispatch_lead.total_seconds()
            ahead = [lead / 2] if lead > 0 else []
            # An early 'skip' run is claimable only from its due time and no NOTIFY comes then:
            # wake at that time (the database says when), not up to half the lead later.
            held = await self.claims.next_claim_at_due() if lead > 0 else None
            if held is not None:
                ahead.append(max(held, 0.0) + 0.001)
            woken = await self.nap(min([poll * random.uniform(0.8, 1.2)] + ahead + self.probe_waits()))
            general = woken or time.monotonic() - last_general >= poll * 0.8

    async def probe(self) -> None:
        """Open breakers whose probe is due: claim one message of the queue and send it."""
        now = time.monotonic()
        for lane in list(self.lanes.values()):
            if lane.breaker.probe_due(now) and not lane.full and not self.waker.stop.is_set():
                lane.breaker.probing = True
                rows = await self.claims.claim(1, [lane.queue], None)
                if rows:
                    self.hand_out(rows, probe=True)
                else:
                    lane.breaker.no_probe_row()

    def probe_waits(self) -> list[float]:
        now = time.monotonic()
        return [max(0.0, lane.breaker.next_probe - now) for lane in self.lanes.values()
                if lane.breaker.open and not lane.breaker.probing]

    async def nap(self, seconds: float) -> bool:
        """Sleep until a NOTIFY or a change of the buckets held (wake_on_change), a lane frees
        room, stop, or the time passes. Returns False when only freed room ended it (then only
        the freed lanes need a claim), else True."""
        if self.waker.wake.is_set():
            self.waker.wake.clear()
            return True
        waits = [asyncio.ensure_future(e.wait()) for e in (self.waker.stop, self.waker.wake, self.room)]
        try:
            done, _ = await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
        woken = self.waker.wake.is_set() or not done
        self.waker.wake.clear()
        return woken

    def sink_of(self, queue: str) -> str | None:
        route = self.routes.target(queue)
        return route.kind if route else None

    async def send(self, lane: Lane, rows: list[Row], claimed_at: float, probe: bool,
                   departure: Departure | None = None) -> None:
        """Send rows (those of a departure at its time: `rows` is its list, which later claims
        may extend until it leaves) and settle them."""
        report = Report(rows)
        try:
            try:
                if departure is not None:
                    await lane.wait_for(departure)
                start = departure.at if departure is not None else time.monotonic()
                # the lease runs from the due time (claim_outbox): count it from there
                try:
                    await lane.send(rows, report, max(claimed_at, start), probe)
                except Exception as exc:
                    # Work on data never stops the process: the rows this send did not settle
                    # fail with the exception (retried with backoff, dead-lettered when out of
                    # attempts), and the relay goes on with every other row and lane.
                    event(log, "send crashed: its rows fail with the error", level=logging.ERROR,
                          queue=lane.queue, rows=len(rows), error=f"{exc.__class__.__name__}: {exc}")
                    done = set(report.ok) | set(report.failed) | set(report.unsent) | set(report.deferred)
                    report.fail([r.outbox_id for r in rows if r.outbox_id not in done],
                                f"relay error while sending: {exc.__class__.__name__}: {exc}")
                seconds = max(0.0, time.monotonic() - start)
            except asyncio.CancelledError:
                # Shutdown timeout: settle the sends that finished, release the rest (maybe
                # sent, so the attempt stays counted: at least once).
                done = set(report.ok) | set(report.failed) | set(report.unsent)
                cut = [r.outbox_id for r in rows if r.outbox_id not in done]
                report.of(rows)  # a departure's rows may have grown since the report was made
                with contextlib.suppress(Exception):
                    await asyncio.shield(self.settler.settle_and_release(report, lane, cut))
                raise
            if report.deferred:
                # The worker cannot reach the database (a restart, a failover): wait a moment
                # (within the lease), then hand the rows back like unsent ones: no attempt
                # counted, no per-row backoff, so they go out as soon as the database is back.
                event(log, "worker cannot reach the database: handing messages back", level=logging.WARNING,
                      queue=lane.queue, messages=len(report.deferred), retry_in_s=report.defer_s)
                await pause(self.waker.stop, min(report.defer_s, max(0.0, self.lease / 2 - seconds)))
                report.unsent.extend(report.deferred)
                report.deferred.clear()
            report.of(rows)  # a departure's rows may have grown since the report was made
            dead = await self.settler.settle(report, lane)
            relay_metrics.observe_batch(rows, set(report.ok), dead, self.sink_of, seconds)
        finally:
            if probe and lane.breaker.probing:  # the probe was not sent (lease too short)
                lane.breaker.no_probe_row()
            lane.rows -= len(rows)
            self.freed.add(lane.queue)
            self.room.set()

    async def drain(self) -> None:
        """Finish in-flight sends within the shutdown timeout, then hand back what is left."""
        children = set(self.tasks.children)
        if children:
            _, pending = await asyncio.wait(children, timeout=self.cfg.shutdown_timeout.total_seconds())
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        with contextlib.suppress(Exception):
            released = await db.retrying(lambda: store.release_outbox(self.pool, self.owner, None, self.s.lease),
                                         budget=5, what="release")
            if released:
                event(log, "released leases", process=self.owner, rows=released)
        for lane in self.lanes.values():
            await lane.close()

    def breakers(self) -> dict[str, dict[str, object]]:
        """Per queue with an open breaker (or recent failures): its state, for /healthz,
        /metrics and the processes view."""
        out = {}
        for q, lane in self.lanes.items():
            if lane.breaker.open or lane.breaker.failures:
                out[q] = lane.breaker.state()
        return out

    def health(self) -> tuple[bool, str]:
        """Open breakers are the sinks' trouble, not the relay's: healthy, with the detail."""
        open_ = {q: b for q, b in self.breakers().items() if b["state"] == "open"}
        if not open_:
            return True, "all closed"
        return True, "open: " + ", ".join(f"{q} (probe every {b['probe_every_s']}s)" for q, b in sorted(open_.items()))


async def run(cfg: Config, waker: Waker, settings: RelaySettings | None = None) -> None:
    s = settings or RelaySettings.from_env()
    check_dispatch_lead(cfg.dispatch_lead, s.lease, "CRONBOX_RELAY_LEASE")
    routes = parse_routes(s.sinks or "*=log", os.environ)
    owner = identity("relay")
    event(log, "starting", process=owner, **{**cfg.describe(), **s.describe(), "sinks": routes.describe()})
    if s.lease.total_seconds() <= s.http_timeout:
        event(log, "lease is not longer than the HTTP timeout: slow sends will be sent twice",
              level=logging.WARNING, lease=s.lease.total_seconds(), http_timeout=s.http_timeout)
    pool = await db.open_pool(cfg.dsn, min_size=1, max_size=s.inflight + 3, name="relay",
                              trust_for=db.RECENTLY_GOOD)
    try:
        leased = await db.retrying(lambda: leases_buckets(pool), budget=60, what="bucket leases")
        # on Citus the queues are read bucket by bucket: a worker node down holds back only its own
        buckets = await db.retrying(lambda: store.every_bucket(pool), budget=60, what="buckets") if leased else [None]
        unchecked = await check_routes(pool, routes, buckets)
        max_result = await db.retrying(lambda: store.max_result_bytes(pool), budget=60, what="max_result_bytes")
        leases = BucketLeases("relay", owner, s.bucket_lease) if leased else None
        async with Supervisor(waker, owner) as tasks:
            relay = Relay(cfg, s, routes, pool, owner, waker, tasks, leases)
            if leases is not None:
                tasks.spawn(keep_leased(pool, leases, waker.stop), name="bucket-leases")
                # a renewal that changes the buckets held wakes the loop: a general claim over them
                tasks.spawn(wake_on_change(leases, [waker.wake], waker.stop), name="bucket-lease-wakes")
            relay.max_result = max_result
            metrics.register_health_check("relay_breakers", relay.health)
            if listen_target(cfg.dsn, cfg.listen_dsn):
                tasks.spawn(listen(listen_target(cfg.dsn, cfg.listen_dsn), ("cronbox_outbox",), waker), name="listener")
            tasks.spawn(keep_registered(pool, "relay", owner, waker.stop,
                                        info=lambda: {"sinks": routes.describe(), "routes": sorted(routes.by_queue),
                                                      "breakers": relay.breakers()}),
                        name="registry")
            tasks.spawn(watch_unrouted(pool, routes, waker, s.check_every, buckets, unchecked), name="unrouted")
            tasks.spawn(watch_named(relay, NAMED_EVERY), name="named")
            tasks.spawn(metrics.serve(cfg, pool, "relay", waker.stop), name="metrics")
            try:
                await relay.loop()
            finally:
                waker.stop.set()
                await relay.drain()
    finally:
        metrics.unregister_health_check("relay_breakers")
        await pool.close()
        event(log, "stopped", process=owner)
