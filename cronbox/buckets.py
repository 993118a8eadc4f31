"""Bucket leases on Citus (docs/citus.md, "No leader: bucket leases"): the pollers, and apart
from them the relays, share the buckets of the job among themselves, no leader, through
cronbox.lease_buckets (sql/citus/functions/process/). A process renews every third of its lease
and works only the buckets it holds; it stops working them once the lease the database granted
has run out without a renewal (a database it cannot reach). Times come from the database: each
renewal returns how long the lease is valid from the database's clock, and that duration is
counted down on this process's monotonic clock, never compared with its wall clock.

The relay's loop runs `keep_leased` as a side task and claims only from `held()` (relay/claims.py, with `Turns`);
the poller's dispatch and saturation loops likewise work only the buckets it holds, one call per
bucket in turn (`Turns`, poller/tick.py and poller/saturation_loop.py). On plain PostgreSQL (no `cronbox.lease_buckets`:
`leases_buckets` says so once at start) neither leases: one call over every bucket, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

import psycopg

from cronbox import db
from cronbox.citus import LEASE_KINDS
from cronbox.log import event
from cronbox.proc import identity

log = logging.getLogger("cronbox.buckets")

# seconds a bucket whose worker node could not be reached is passed over before it is tried again
UNREACHED_PAUSE = 1.0

@dataclasses.dataclass(frozen=True)
class Lease:
    """One renewal's answer: the buckets held, for how long, among how many live processes."""

    buckets: tuple[int, ...]
    valid_for: float  # seconds from the renewal, by the database's clock
    members: int
    share: int


async def leases_buckets(pool) -> bool:
    """Whether the database has the Citus layer's bucket leases (`cronbox migrate --citus`):
    then a poller works only the buckets it holds (docs/citus.md, "No leader")."""
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT to_regprocedure('cronbox.lease_buckets(text, text, interval)') IS NOT NULL")
        row = await cur.fetchone()
    return bool(row and row[0])


class Turns:
    """The order a loop visits the buckets it holds: each call starts one bucket further, so no
    bucket always goes first (several loops may share one). `quiet` counts the visits in a row
    that found nothing more to do: a loop sleeps once it has looked at every held bucket so."""

    def __init__(self) -> None:
        self.turn = 0
        self.quiet = 0

    def order(self, held: tuple[int, ...]) -> tuple[int, ...]:
        """Every held bucket, starting one further than the last call."""
        if not held:
            return held
        start = self.turn % len(held)
        self.turn += 1
        return held[start:] + held[:start]

    def next(self, held: tuple[int, ...]) -> int:
        """The next held bucket in turn (held must not be empty)."""
        bucket = held[self.turn % len(held)]
        self.turn += 1
        return bucket

    def idle(self, span: int) -> bool:
        """A visit found nothing more to do: True when the last `span` visits all did (then
        sleep; the count starts again)."""
        self.quiet += 1
        if self.quiet >= span:
            self.quiet = 0
            return True
        return False


T = TypeVar("T")


class Unreached:
    """The held buckets whose worker node could not be reached, per loop (docs/citus.md, "A
    worker node stopped"). A loop going bucket by bucket calls each bucket through `call`: a
    bucket whose node is unreachable gives `default` (nothing done) and is passed over for
    `UNREACHED_PAUSE` seconds, so a stopped worker node stops only its own buckets' work while
    the loop goes on with the others; logged once when a bucket's node goes and once when it
    is reached again. Without a bucket (plain PostgreSQL, one call over every bucket) the call
    is made as it is, any error its caller's."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.until: dict[int, float] = {}  # bucket -> monotonic time before which it is passed over

    async def call(self, bucket: int | None, op: Callable[[], Awaitable[T]], default: T) -> T:
        if bucket is None:
            return await op()
        if time.monotonic() < self.until.get(bucket, 0.0):
            return default
        try:
            result = await op()
        except psycopg.Error as exc:
            if not db.node_unreachable(exc):
                raise
            if bucket not in self.until:
                event(log, "a bucket's worker node is unreachable: its work waits, the other buckets go on",
                      level=logging.WARNING, loop=self.what, bucket=bucket, error=db.explain(exc))
            self.until[bucket] = time.monotonic() + UNREACHED_PAUSE
            return default
        if self.until.pop(bucket, None) is not None:
            event(log, "a bucket's worker node is reached again", loop=self.what, bucket=bucket)
        return result


async def wake_on_change(leases: BucketLeases, wakes: list[asyncio.Event], stop: asyncio.Event) -> None:
    """Side task: set every event of `wakes` when a renewal changes the buckets held (a loop
    asleep with no bucket, or with fewer, starts on the new ones at once)."""
    while not stop.is_set():
        waits = [asyncio.ensure_future(leases.changed.wait()), asyncio.ensure_future(stop.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
        if leases.changed.is_set():
            leases.changed.clear()
            for e in wakes:
                e.set()


class BucketLeases:
    """The buckets one process holds. `renew` once every `renew_every` seconds; `held()` is what
    to work now (empty once the last granted lease has run out)."""

    def __init__(self, kind: str, owner: str | None = None, lease: float = 10.0):
        if kind not in LEASE_KINDS:
            raise ValueError(f"kind: must be one of {', '.join(LEASE_KINDS)}, got {kind!r}")
        if not 1.0 <= lease <= 3600.0:
            raise ValueError(f"lease: must be from 1 to 3600 seconds, got {lease}")
        self.kind = kind
        self.owner = owner or identity(kind)
        self.lease = lease
        self.last: Lease | None = None
        self._until = 0.0  # monotonic deadline of the last granted lease
        self.changed = asyncio.Event()  # set when a renewal changes the buckets held (the loop clears it)

    @property
    def renew_every(self) -> float:
        return self.lease / 3

    async def renew(self, conn: psycopg.AsyncConnection) -> Lease:
        """One call of cronbox.lease_buckets (its own transaction when conn is in autocommit)."""
        started = time.monotonic()
        cur = await conn.execute(
            "SELECT buckets, extract(epoch FROM valid_for)::float8, members, share"
            " FROM cronbox.lease_buckets(%s, %s, %s)", (self.kind, self.owner, timedelta(seconds=self.lease)))
        row = await cur.fetchone()
        assert row is not None
        lease = Lease(tuple(row[0]), float(row[1]), int(row[2]), int(row[3]))
        before = self.last.buckets if self.last else ()
        self.last, self._until = lease, started + lease.valid_for
        if lease.buckets != before:
            self.changed.set()
            event(log, "bucket leases changed", kind=self.kind, owner=self.owner, held=len(lease.buckets),
                  share=lease.share, members=lease.members,
                  taken=len(set(lease.buckets) - set(before)), given_up=len(set(before) - set(lease.buckets)))
        return lease

    def held(self) -> tuple[int, ...]:
        """The buckets to work now: those of the last renewal, while its lease lasts."""
        if self.last is None or time.monotonic() >= self._until:
            return ()
        return self.last.buckets

    async def release(self, conn: psycopg.AsyncConnection) -> int:
        """Give every bucket up at once (a clean stop), leaving the count of live processes."""
        cur = await conn.execute("SELECT cronbox.release_buckets(%s, %s)", (self.kind, self.owner))
        row = await cur.fetchone()
        self.last, self._until = None, 0.0
        return int(row[0]) if row else 0


async def keep_leased(pool, leases: BucketLeases, stop: asyncio.Event) -> None:
    """Side task: renew every third of the lease until `stop`, then release. A failed renewal
    (database unreachable, failover) is logged and retried at the next turn; meanwhile `held()`
    empties itself when the lease runs out, so the loops stop working buckets others may take."""
    try:
        while not stop.is_set():
            try:
                async with pool.connection() as conn:
                    await leases.renew(conn)
            except psycopg.OperationalError as exc:  # a lost connection, a failover, a pool timeout
                event(log, "bucket lease renewal failed, retrying", level=logging.WARNING, error=db.explain(exc))
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), leases.renew_every)
    finally:
        try:
            async with pool.connection() as conn:
                await leases.release(conn)
        except psycopg.Error as exc:  # the leases then run out by themselves
            event(log, "could not release bucket leases", level=logging.WARNING, error=db.explain(exc))
