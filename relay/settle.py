"""Settling what a send left: ack what was delivered, nack what failed, hand back what was never
sent, bucket by bucket (each call names the bucket of its rows). Also the rows no lane may send:
claimed too often without a settlement (worn) and those of a queue the relay does not push.

A value the database refuses never stops the process: the ack is made again with the workers'
outcomes replaced by failures naming the reason, and what still fails is left to the lease,
whose claims are bounded (`Settler.worn`). Connection errors are retried for SETTLE_BUDGET
seconds; after that the lease brings the rows back (at least once). On Citus, a bucket whose
worker node is unreachable is not retried: its rows wait for their lease, the other buckets'
are settled (cronbox.buckets.Unreached)."""

from __future__ import annotations

import logging

from cronbox import db
from cronbox.buckets import Unreached
from cronbox.log import event
from relay import store
from relay.lanes import Lane
from relay.settings import RelaySettings
from relay.sinks import Report, Row
from relay.store import retrying

log = logging.getLogger("cronbox.relay")
SETTLE_BUDGET = 600.0  # keep retrying an ack this long; after that the lease brings rows back


class Settler:
    """The relay's calls that end its leases on rows: one per process, shared by every lane."""

    def __init__(self, pool, owner: str, s: RelaySettings):
        self.pool, self.owner, self.s = pool, owner, s
        self.unreached = Unreached("relay settle")

    async def worn(self, rows: list[Row]) -> None:
        """Rows claimed more often than CRONBOX_RELAY_MAX_ATTEMPTS and never settled: a relay
        that claimed them died, was stopped or lost the lease each time (a crash one of them
        causes would come back to every relay that claims it): dead letters, with the reason."""
        report = Report(rows)
        for r in rows:
            report.fail([r.outbox_id], f"claimed {r.claims} times and never settled: the relays handling it "
                        f"stopped or lost its lease each time (CRONBOX_RELAY_MAX_ATTEMPTS={self.s.max_attempts})",
                        retryable=False)
        await self.settle(report, None)

    async def unroutable(self, rows: list[Row]) -> None:
        report = Report(rows)
        report.fail([r.outbox_id for r in rows], f"queue {rows[0].queue!r} is not pushed by this relay")
        await self.settle(report, None)

    async def settle(self, report: Report, lane: Lane | None) -> set[int]:
        """Ack what was delivered, nack what failed, hand back what was never sent, bucket by
        bucket (each call names the bucket of its rows); returns the dead-lettered outbox ids."""
        dead: set[int] = set()
        for part in report.by_bucket():
            # a bucket whose worker node is unreachable: its rows wait for their lease, the other
            # buckets' are settled
            dead |= await self.unreached.call(part.bucket, lambda: self.settle_bucket(part, lane), set())
        return dead

    async def settle_and_release(self, report: Report, lane: Lane, cut: list[int]) -> None:
        """Settle what finished and release the leases of `cut` (sends cut short: maybe sent, so
        their attempt stays counted)."""
        await self.settle(report, lane)
        if cut:
            await db.retrying(lambda: store.release_outbox(self.pool, self.owner, cut, self.s.lease, report.bucket),
                              budget=5, what="release")

    async def settle_bucket(self, report: Report, lane: Lane | None) -> set[int]:
        """Settle one bucket's rows (on plain PostgreSQL, the one bucket 0). A value refused (by
        the database, or one that cannot be written; connection errors are retried within)
        never stops the process: the ack is made again with the workers' outcomes replaced by
        failures naming the reason, and what still fails is left to the lease, whose claims are
        bounded (worn)."""
        try:
            return await self._settle(report, lane)
        except Exception as exc:  # connection errors were retried within: a value refused
            if db.node_unreachable(exc):  # not a value refused: the caller passes the bucket over
                raise
            event(log, "settling refused", level=logging.ERROR,
                  queue=lane.queue if lane else None, error=db.explain(exc))
            if not report.outcomes:
                return set()
            # the workers' answers are what the database can refuse: the runs fail with its reason
            why = f"answer refused: {db.explain(exc)}"
            report.outcomes = [{"outbox_id": oc["outbox_id"], "state": "failed", "retryable": False, "error": why}
                               for oc in report.outcomes]
            try:
                return await self._settle(report, lane)
            except Exception as again:
                event(log, "settling refused again: the lease brings the rows back", level=logging.ERROR,
                      queue=lane.queue if lane else None, error=db.explain(again))
                return set()

    async def _settle(self, report: Report, lane: Lane | None) -> set[int]:
        if report.ok:
            await retrying(lambda: store.ack_outbox(self.pool, self.owner, report),
                           budget=SETTLE_BUDGET, what="relay ack")
        if report.unsent:
            await retrying(lambda: store.nack_outbox_unsent(self.pool, self.owner, report.unsent, self.s.lease,
                                                            report.bucket),
                           budget=SETTLE_BUDGET, what="relay hand-back")
        if report.failed:
            retried, dead = await retrying(lambda: store.nack_outbox(self.pool, self.owner, report, self.s),
                                           budget=SETTLE_BUDGET, what="relay nack")
            event(log, "sends failed", level=logging.ERROR if dead else logging.WARNING,
                  queue=lane.queue if lane else None, failed=len(report.failed), retried=retried,
                  dead_lettered=len(dead), first_error=report.errors[0])
            return set(dead)
        return set()
