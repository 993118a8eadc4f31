"""The relay's claims: one claim over every bucket on plain PostgreSQL; on a database with the
Citus layer's bucket leases (cronbox/buckets.py, docs/citus.md "No leader"), one claim per bucket
this relay holds (one shard each), in turn from one bucket further at each call (`Turns`), until
the limit; none while it holds no bucket. Retried while PostgreSQL is away, abandoned on stop."""

from __future__ import annotations

import asyncio
import contextlib

import psycopg

from cronbox.buckets import BucketLeases, Turns, Unreached
from cronbox.config import Config
from relay import store
from relay.settings import RelaySettings
from relay.sinks import Row
from relay.store import retrying


class Claimer:
    """Claims for one relay (its owner name, lease and the early-dispatch lead)."""

    def __init__(self, cfg: Config, s: RelaySettings, pool, owner: str, stop: asyncio.Event,
                 leases: BucketLeases | None = None):
        self.cfg, self.s, self.pool, self.owner, self.stop = cfg, s, pool, owner, stop
        self.leases = leases   # on Citus: the buckets this relay holds (None: every bucket)
        self.turns = Turns()   # which held bucket the next claim starts from
        self.unreached = Unreached("relay claim")

    async def claim(self, limit: int, include: list[str] | None, exclude: list[str] | None) -> list[Row]:
        """One claim, retried while PostgreSQL is away, abandoned on stop (the final release
        sweep hands back anything a cancelled claim may have leased)."""
        claim = asyncio.ensure_future(self.claim_buckets(limit, include, exclude))
        stop = asyncio.ensure_future(self.stop.wait())
        try:
            await asyncio.wait({claim, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            if not claim.done():
                claim.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await claim
        return [] if claim.cancelled() else claim.result()

    async def claim_buckets(self, limit: int, include: list[str] | None, exclude: list[str] | None) -> list[Row]:
        """Without bucket leases (plain PostgreSQL), one claim over every bucket. With them, one
        claim per bucket held (one shard each on Citus), starting one bucket further at each
        call so no bucket always goes first, until `limit` rows; none while it holds no bucket."""
        def one(n: int, bucket: int | None):
            # a bucket whose worker node is unreachable gives nothing: the other buckets are claimed
            return retrying(lambda: self.unreached.call(
                bucket, lambda: store.claim_outbox(self.pool, self.owner, n, self.s.lease, include, exclude,
                                                   self.cfg.dispatch_lead, bucket), []),
                budget=3600, what="relay claim")
        if self.leases is None:
            return await one(limit, None)
        rows: list[Row] = []
        for bucket in self.turns.order(self.leases.held()):
            rows += await one(limit - len(rows), bucket)
            if len(rows) >= limit or self.stop.is_set():
                break
        return rows

    async def next_claim_at_due(self) -> float | None:
        """Seconds until the first early 'skip' run within the lead may be claimed (the
        database's answer, per bucket held), None when none is known: the relay claims then."""
        if not self.cfg.dispatch_lead or self.stop.is_set():
            return None
        waits: list[float] = []
        for bucket in ([None] if self.leases is None else self.leases.held()):
            try:  # only a wake-up time: without it the relay wakes as it would have (half its lead)
                wait = await store.next_claim_at_due(self.pool, self.cfg.dispatch_lead, bucket)
            except psycopg.Error:
                return None
            if wait is not None:
                waits.append(wait)
        return min(waits, default=None)
