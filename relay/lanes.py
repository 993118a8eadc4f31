"""Lanes: each queue is sent through its own lane, so one slow queue never delays another.

A lane is one queue's share of the relay: a budget of claimed messages in flight (the relay
stops claiming the queue while the lane is full), its own aiohttp session (connection limit
and connect/total timeouts of the queue's route, so two queues on one URL never wait for each
other's connections), and a circuit breaker. Nothing a lane does holds a claim slot or a
database connection while a request is pending: the claim loop goes on for the other queues.

Circuit breaker (per queue): after `breaker` consecutive failed requests (timeout, connection
error, 408/429/5xx) the lane opens: requests of that queue not yet started are not sent but
handed back (`cronbox.nack_outbox_unsent`: attempt not counted, back in their place in the
claim order), and the relay claims nothing of the queue except one message (the oldest) per
probe interval (1 s doubling to CRONBOX_RELAY_BREAKER_PROBE_MAX). A probe that succeeds
closes the breaker and the backlog drains in claim order (due time); one that fails doubles
the interval.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Sequence

import aiohttp
from prometheus_client import Gauge

from cronbox.log import event
from relay.routes import Route
from relay.settings import RelaySettings
from relay.sinks import Report, Row, post, send_log

log = logging.getLogger("cronbox.relay")


class Breaker:
    """Consecutive-failure circuit breaker with a growing probe interval (monotonic clock)."""

    def __init__(self, queue: str, threshold: int, probe: float, probe_max: float):
        self.queue, self.threshold, self.probe, self.probe_max = queue, threshold, probe, probe_max
        self.failures = 0            # consecutive failed requests
        self.opened_at: float | None = None
        self.interval = probe
        self.next_probe = 0.0
        self.probing = False          # a probe message is claimed and being sent
        self.opened_total = 0

    @property
    def open(self) -> bool:
        return self.opened_at is not None

    def record(self, ok: bool, *, probe: bool = False) -> None:
        now = time.monotonic()
        if ok:
            if self.open:
                event(log, "circuit breaker closed: the sink answers again", queue=self.queue,
                      was_open_seconds=round(now - (self.opened_at or now), 3))
            self.failures, self.opened_at, self.interval, self.probing = 0, None, self.probe, False
            BREAKER_OPEN.labels(self.queue).set(0)
            return
        self.failures += 1
        if not self.threshold:
            return
        if probe or (not self.open and self.failures >= self.threshold):
            if self.open:
                self.interval = min(self.interval * 2, self.probe_max)
            else:
                self.opened_at, self.opened_total = now, self.opened_total + 1
                BREAKER_OPEN.labels(self.queue).set(1)
                event(log, "circuit breaker open: sink keeps failing, probing instead", level=logging.WARNING,
                      queue=self.queue, failures=self.failures, probe_every=self.interval)
            self.probing = False
            self.next_probe = now + self.interval * random.uniform(0.9, 1.1)

    def probe_due(self, now: float) -> bool:
        return self.open and not self.probing and now >= self.next_probe

    def no_probe_row(self) -> None:
        """A probe claim found nothing of the queue: look again after the same interval."""
        self.probing = False
        self.next_probe = time.monotonic() + self.interval

    def state(self) -> dict[str, object]:
        return {"state": "open" if self.open else "closed", "consecutive_failures": self.failures,
                "probe_every_s": round(self.interval, 3) if self.open else None}


class Lane:
    """One queue's sending state in this relay."""

    def __init__(self, queue: str, route: Route, s: RelaySettings, batch: int, lease: float):
        self.queue, self.route = queue, route
        self.budget = route.inflight or s.inflight * batch
        self.rows = 0  # claimed and not yet settled
        self.lease = lease
        self.timeout = route.timeout or s.http_timeout
        self.connect_timeout = min(route.connect_timeout or s.http_connect_timeout, self.timeout)
        self.connections = route.connections or s.http_connections
        threshold = s.breaker_failures if route.breaker is None else route.breaker
        self.breaker = Breaker(queue, threshold if route.kind == "http" else 0, s.breaker_probe, s.breaker_probe_max)
        self.requests = asyncio.Semaphore(self.connections)
        self._session: aiohttp.ClientSession | None = None

    @property
    def full(self) -> bool:
        return self.rows >= self.budget

    @property
    def blocked(self) -> bool:
        """Not to be claimed by the general claim: full, or its breaker is open."""
        return self.full or self.breaker.open

    def room(self) -> int:
        return max(0, self.budget - self.rows)

    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.timeout, connect=self.connect_timeout),
                connector=aiohttp.TCPConnector(limit=self.connections))
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def send(self, rows: Sequence[Row], report: Report, claimed_at: float, probe: bool = False) -> None:
        """Send one group of this queue's rows (all due now); results land in report."""
        if self.route.kind == "log":
            send_log(rows, report)
            return
        if self.route.batch == 1:
            chunks = [([r.outbox_id], r.body.encode(), r.key, False) for r in rows]
        else:
            chunks = []
            for i in range(0, len(rows), self.route.batch):
                part = rows[i:i + self.route.batch]
                chunks.append(([r.outbox_id for r in part], ("[" + ",".join(r.body for r in part) + "]").encode(),
                               None, True))
        # A request must end before the lease does, or another relay sends the rows again: rows
        # still waiting for a connection after that are handed back unsent (with a lease no
        # longer than the timeout, which the relay warns about at start, after half the lease).
        window = self.lease - self.timeout if self.lease > self.timeout else self.lease / 2
        latest_start = claimed_at + window
        await asyncio.gather(*(self._request(ids, body, key, batched, report, latest_start, probe)
                               for ids, body, key, batched in chunks))

    async def _request(self, ids: list[int], body: bytes, key: str | None, batched: bool, report: Report,
                       latest_start: float, probe: bool) -> None:
        async with self.requests:
            if (self.breaker.open and not probe) or time.monotonic() > latest_start:
                report.unsent.extend(ids)
                return
            ok = await post(self.session(), self.route, ids, body, key, batched, report)
        self.breaker.record(ok, probe=probe)


BREAKER_OPEN = Gauge("cronbox_relay_breaker_open", "1 while a queue's circuit breaker is open in this relay",
                     ["queue"])
