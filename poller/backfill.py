"""Backfill passes: materialise the fires of `cronbox.backfill(name, from, to)` requests.

One pass = one transaction: `cronbox.claim_backfills` locks a few pending requests and their
jobs (SKIP LOCKED: a job being saturated or dispatched is taken next round), `plan_request()` computes each request's fires with the saturation
code (`poller.fires.source`, the same fire times as regular saturation), and
`cronbox.store_backfill` writes them as futures of origin 'backfill', skipping fires that
already ran or are pending.

Only fires the job's saturation has passed (<= its frontier) are handled: a fire is then
either pending, ran, was recorded missed or fell inside a pause, and saturation never
materialises it again, so a backfilled fire and a regular one of the same time cannot both
be made. Fires beyond the frontier wait for a later pass (a paused job's: until resumed).
A request makes at most `fires_left` fires (1000 in all); a cron range with more stops there.

By bucket (docs/citus.md, "Backfill, bucket by bucket"): a poller leasing buckets passes one
bucket per pass (the claim and the store touch that bucket's rows only); on plain PostgreSQL a
pass claims over every bucket, and is stored once per bucket of its requests (its one bucket).
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import namedtuple_row

from poller import store
from poller.fires import source
from poller.quarantine import CONNECTION_ERRORS, describe

BATCH = 10  # requests per pass (each at most 1000 fires in all)
# Fires one request makes per pass: a long backfill advances over several passes, so a pass
# holds its jobs' locks for a few milliseconds of computing, not for 10 x 1,000 fires.
PASS_FIRES = 100
_TINY = timedelta(microseconds=1)


@dataclasses.dataclass
class Step:
    fires: list[datetime]
    done_through: datetime | None
    done: bool
    note: str | None = None


def plan_request(req: Any) -> Step:
    """The fires of one request this pass may make, oldest first."""
    after = req.done_through or req.from_at - _TINY
    if req.starts_at is not None and after < req.starts_at - _TINY:
        after = req.starts_at - _TINY
    to, ends_at, frontier = req.to_at, req.ends_at, req.frontier
    last = to if ends_at is None else min(to, ends_at)
    fires: list[datetime] = []
    if frontier is None:  # the poller has not saturated this job yet
        return Step(fires, req.done_through, False)
    for fire in source(req).iterate(after):
        if fire > last:
            break
        if fire > frontier:  # not handled by saturation yet: a later pass
            return Step(fires, fires[-1] if fires else req.done_through, False)
        if len(fires) >= req.fires_left:
            return Step(fires, fires[-1] if fires else req.done_through, True,
                        f"stopped at the cap of 1000 fires: fires from {fire.isoformat()} on were not backfilled")
        if len(fires) >= PASS_FIRES:  # the rest in the next pass, from the last fire made
            return Step(fires, fires[-1], False)
        fires.append(fire)
    return Step(fires, fires[-1] if fires else req.done_through, True)


async def backfill_once(conn: psycopg.AsyncConnection, batch: int = BATCH,
                        now: datetime | None = None, bucket: int | None = None) -> tuple[int, int, int]:
    """One pass in one transaction: (requests claimed, futures made, duplicates skipped), of
    `bucket`'s requests only when given (None: every bucket). `now` overrides the database clock
    (tests only: the internal _at functions).

    Isolation: a request whose fires cannot be computed ends with a note; if storing the pass
    fails in SQL, each request is stored alone (a savepoint each) and only the one that fails
    ends, with the error as its outcome, so one bad request never stops the others."""
    async with conn.transaction():
        cur = conn.cursor(row_factory=namedtuple_row)
        await store.claim_backfills(cur, batch, now, bucket)
        reqs = await cur.fetchall()
        if not reqs:
            return 0, 0, 0
        # computed in a worker thread: the event loop (the dispatch loop's) is never held
        steps = await asyncio.to_thread(_plan_all, reqs)
        try:
            async with conn.transaction():  # a savepoint: a failure leaves the claim's locks
                made, dups = await _store(conn, steps, now)
        except CONNECTION_ERRORS:
            raise
        except psycopg.Error:
            made = dups = 0
            for req, step in steps:
                try:
                    async with conn.transaction():
                        m, d = await _store(conn, [(req, step)], now)
                except CONNECTION_ERRORS:
                    raise
                except psycopg.Error as exc:  # this request's fires cannot be stored: it ends
                    m, d = await _store(conn, [(req, Step([], req.done_through, True,
                                                          f"cannot store fires: {describe(exc)}"))], now)
                made, dups = made + m, dups + d
        return len(reqs), made, dups


def _plan_all(reqs: list[Any]) -> list[tuple[Any, Step]]:
    steps = []
    for req in reqs:
        try:
            step = plan_request(req)
        except Exception as exc:  # the job's fires cannot be computed: the request ends here
            step = Step([], req.done_through, True, f"cannot compute fires: {describe(exc)}")
        steps.append((req, step))
    return steps


async def _store(conn: psycopg.AsyncConnection, steps: list[tuple[Any, Step]],
                 now: datetime | None) -> tuple[int, int]:
    """cronbox.store_backfill for these requests' steps, as its parallel arrays, one call per
    bucket of the requests (plain PostgreSQL: one)."""
    by_bucket: dict[int, list[tuple[Any, Step]]] = {}
    for req, step in steps:
        by_bucket.setdefault(req.bucket, []).append((req, step))
    made = dups = 0
    for bucket, of_bucket in by_bucket.items():
        ids, through, done, notes, fire_req, fire_at = [], [], [], [], [], []
        for req, step in of_bucket:
            ids.append(req.backfill_id), through.append(step.done_through)
            done.append(step.done), notes.append(step.note)
            fire_req += [req.backfill_id] * len(step.fires)
            fire_at += step.fires
        m, d = await store.store_backfill(conn, [ids, through, done, notes, fire_req, fire_at], now, bucket)
        made, dups = made + m, dups + d
    return made, dups
