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

Batches by negotiation (route `batch=auto`, the default): a lane sends one message per request
until a 2xx answer declares `Cronbox-Accept-Batch: N`; from then on it sends JSON arrays of up to
N, and goes back to single messages when a 2xx answer no longer declares it or a batch is
refused with a 4xx (relay/sinks.py retries those messages). The worker kit declares its
concurrency; a worker that never answers the header gets exactly what it always got.

Departures: rows claimed ahead of their due time (CRONBOX_DISPATCH_LEAD) wait in the lane for
it, grouped by due time across claims, so the fires of one instant leave together, as few
requests as the batch size allows, whichever claims brought them. They leave within a
fraction of a millisecond of that time, never before it (the event loop's timers are rounded
up to whole milliseconds: the last SPIN seconds are waited out by yielding to the loop).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import defaultdict
from collections.abc import Sequence

import aiohttp
from prometheus_client import Gauge

from cronbox.log import event
from relay.routes import Route
from relay.settings import RelaySettings
from relay.mail import send_mail, send_webhooks
from relay.sinks import ACCEPT_BATCH_HEADER, Answer, Report, Row, post, refused, send_log

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


STAKEHOLDER_GROUP = 50  # mails per SMTP connection, webhooks per turn
SPIN = 0.0015  # the last seconds before a departure are waited by yielding, not by a timer


class Departure:
    """Rows of one queue claimed ahead and due at one time: they leave together at `at`
    (this process's monotonic clock), whichever claims brought them."""

    __slots__ = ("key", "at", "rows")

    def __init__(self, key: float, at: float, rows: list[Row]):
        self.key, self.at, self.rows = key, at, rows


class Lane:
    """One queue's sending state in this relay."""

    def __init__(self, queue: str, route: Route, s: RelaySettings, batch: int, lease: float,
                 max_result: int = 1048576):
        self.queue, self.route = queue, route
        self.max_result = max_result  # cronbox.max_result_bytes: bounds how much of an answer is read
        self.budget = route.inflight or s.inflight * batch
        self.rows = 0  # claimed and not yet settled
        self.lease = lease
        self.timeout = route.timeout or s.http_timeout
        self.connect_timeout = min(route.connect_timeout or s.http_connect_timeout, self.timeout)
        self.connections = route.connections or s.http_connections
        threshold = s.breaker_failures if route.breaker is None else route.breaker
        if route.kind == "webhook" and route.breaker is None:
            threshold = 0  # many recipients' hooks share the lane: one broken hook never stops the others
        self.breaker = Breaker(queue, threshold if route.kind in ("http", "mail", "webhook") else 0,
                               s.breaker_probe, s.breaker_probe_max)
        self.requests = asyncio.Semaphore(self.connections)
        self._session: aiohttp.ClientSession | None = None
        self.accepts = 1  # batch=auto: the batch size the worker last declared (1: single messages)
        self.departures: dict[float, Departure] = {}  # by due time (database clock, ms), not yet left

    @property
    def batch(self) -> int:
        return self.route.batch or self.accepts

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

    def board(self, rows: list[Row], merge: bool = True) -> list[tuple[Departure | None, list[Row]]]:
        """One claim's rows of this queue as sends to start: those due now as one send (no
        departure); those claimed ahead per due time, joining the waiting departure of that
        time (nothing new to start: its send takes them) or opening one. `merge=False` (a
        breaker's probe) keeps them apart."""
        now = time.monotonic()
        sends: list[tuple[Departure | None, list[Row]]] = []
        due_now = [r for r in rows if r.send_at <= now]
        if due_now:
            sends.append((None, due_now))
        ahead: dict[float, list[Row]] = defaultdict(list)
        for r in rows:
            if r.send_at > now:
                ahead[round(r.due, 3)].append(r)
        for key, part in sorted(ahead.items()):
            at = max(r.send_at for r in part)
            waiting = self.departures.get(key) if merge else None
            if waiting is not None:
                waiting.rows.extend(part)
                waiting.at = max(waiting.at, at)
                continue
            departure = Departure(key, at, part)
            if merge:
                self.departures[key] = departure
            sends.append((departure, part))
        return sends

    async def wait_for(self, departure: Departure) -> None:
        """Until the departure's time, then closed to newcomers (they open the next one)."""
        try:
            while (left := departure.at - time.monotonic()) > SPIN:
                await asyncio.sleep(left - SPIN)
            while time.monotonic() < departure.at:
                await asyncio.sleep(0)
        finally:
            if self.departures.get(departure.key) is departure:
                del self.departures[departure.key]

    async def send(self, rows: Sequence[Row], report: Report, claimed_at: float, probe: bool = False) -> None:
        """Send one group of this queue's rows (all due now); results land in report."""
        if self.route.kind == "log":
            send_log(rows, report)
            return
        window = self.lease - self.timeout if self.lease > self.timeout else self.lease / 2
        if self.route.kind in ("mail", "webhook"):
            await self._send_stakeholders(rows, report, claimed_at + window, probe)
            return
        size = self.batch
        if size == 1:
            chunks = [([r.outbox_id], r.body.encode(), r.key, False) for r in rows]
        else:
            chunks = []
            for i in range(0, len(rows), size):
                part = rows[i:i + size]
                chunks.append(([r.outbox_id for r in part], ("[" + ",".join(r.body for r in part) + "]").encode(),
                               None, True))
        # A request must end before the lease does, or another relay sends the rows again: rows
        # still waiting for a connection after that are handed back unsent (with a lease no
        # longer than the timeout, which the relay warns about at start, after half the lease).
        latest_start = claimed_at + window
        await asyncio.gather(*(self._request(ids, body, key, batched, report, latest_start, probe)
                               for ids, body, key, batched in chunks))

    async def _request(self, ids: list[int], body: bytes, key: str | None, batched: bool, report: Report,
                       latest_start: float, probe: bool) -> None:
        async with self.requests:
            if (self.breaker.open and not probe) or time.monotonic() > latest_start:
                report.unsent.extend(ids)
                return
            answer = await post(self.session(), self.route, ids, body, key, batched, report,
                                negotiated=batched and self.route.batch is None, max_result=self.max_result)
        self.breaker.record(answer.sane, probe=probe)
        if self.route.batch is None:
            self.negotiate(answer, batched)

    async def _send_stakeholders(self, rows: Sequence[Row], report: Report, latest_start: float, probe: bool) -> None:
        """A job's own recipients (relay/mail.py): mails over one SMTP connection per group,
        webhooks one request each; groups not started before latest_start are handed back."""
        for i in range(0, len(rows), STAKEHOLDER_GROUP):
            part = rows[i:i + STAKEHOLDER_GROUP]
            if (self.breaker.open and not probe) or time.monotonic() > latest_start:
                report.unsent.extend(r.outbox_id for r in part)
                continue
            async with self.requests:
                if self.route.kind == "mail":
                    sane = await send_mail(self.route, part, report, self.timeout)
                else:
                    sane = await send_webhooks(self.session(), self.route, part, report)
            self.breaker.record(sane, probe=probe)

    def negotiate(self, answer: Answer, batched: bool) -> None:
        """batch=auto: follow what the worker's answers declare (nothing changes without one)."""
        if answer.status is None:
            return
        if 200 <= answer.status < 300:
            accepts = answer.accepts or 1
        elif batched and refused(answer.status):
            accepts = 1
        else:
            return
        if accepts != self.accepts:
            event(log, "sink declares batches: sending JSON arrays" if accepts > 1
                  else "sink takes single messages: one request per message",
                  queue=self.queue, url=self.route.url, batch=accepts, header=ACCEPT_BATCH_HEADER)
            self.accepts = accepts


BREAKER_OPEN = Gauge("cronbox_relay_breaker_open", "1 while a queue's circuit breaker is open in this relay",
                     ["queue"])
