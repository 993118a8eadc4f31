"""Saturation: keep every active job's fires materialised up to the horizon.

One pass = one transaction: `cronbox.claim_saturation` takes the lock of a batch of jobs with
less than half the horizon materialised (SKIP LOCKED: pollers get disjoint jobs),
poller/plan.py computes their fires from each frontier (the previous *scheduled* time, never
the clock) up to now + horizon, and `cronbox.store_fires` writes them set-based, one
statement per table for the whole pass.

A pass is time-sliced: the fires are computed in a worker thread (the event loop, and with it
dispatch, keeps running), job after job until the pass's budget of time (counted from the
claim) or fires is spent;
the jobs not reached are left as they were and their locks end with the pass, so the next
pass takes them. No pass holds its jobs' locks much longer than the budget, and a long
catch-up advances over several passes (at most MAX_FIRES_PER_JOB futures per job per pass).
The caller sizes passes by time (poller.sizing.PassSizer: each Pass says how long, claim to
commit, it held its locks; `batch` and `scale` shrink when that was too long).
Everything here is arithmetic on what the database returned; the only clock is the
database's (`now` and the catch-up window start come back from the claim).

Isolation: a job whose row cannot be read, whose fires cannot be computed, or whose fires
make store_fires fail is quarantined (poller/quarantine.py) and the pass goes on with the
others in the same transaction.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Sequence
from datetime import datetime, timedelta

import psycopg

from poller import store
from poller.plan import Plan, Planned, plan_jobs
from poller.quarantine import CONNECTION_ERRORS, describe, isolate, quarantine
from poller.store import Job, job_row

log = logging.getLogger("cronbox.poller")


async def _fetch_jobs(cur: psycopg.AsyncCursor[Job]) -> tuple[list[Job], list[tuple[int, str]]]:
    """The claimed rows; a row psycopg cannot load (a BC date, a value out of Python's range)
    is reported by job id (read raw from the result) instead of failing the pass."""
    try:  # all at once; row by row only when a row cannot be loaded
        return await cur.fetchall(), []
    except CONNECTION_ERRORS:
        raise
    except Exception:
        await cur.scroll(0, mode="absolute")
    jobs: list[Job] = []
    bad: list[tuple[int, str]] = []
    for pos in range(cur.rowcount):
        try:
            row = await cur.fetchone()  # does not advance past a row it cannot load
        except CONNECTION_ERRORS:
            raise
        except Exception as exc:
            raw = cur.pgresult.get_value(pos, 0) if cur.pgresult is not None else None
            if raw is None:
                raise
            bad.append((int(bytes(raw).decode()), f"cannot read the job row: {describe(exc)}"))
            await cur.scroll(1)
        else:
            if row is not None:
                jobs.append(row)
    return jobs, bad


@dataclasses.dataclass
class Pass:
    claimed: int = 0   # jobs locked by the claim
    planned: int = 0   # of which computed and stored in this pass (the others: the next pass)
    futures: int = 0
    missed: int = 0
    deferred: int = 0  # jobs left with catch-up fires to write while dispatch had a backlog
    computed: int = 0  # distinct fire computations (jobs sharing every input share one)
    seconds: float = 0.0  # from the claim to the commit: how long the jobs' locks were held

    @property
    def cut(self) -> bool:
        """The budget ended the pass before every claimed job was computed."""
        return self.planned + self.deferred < self.claimed


async def saturate_once(conn: psycopg.AsyncConnection, *, batch: int, horizon: timedelta,
                        grace: timedelta, now: datetime | None = None) -> tuple[int, int, int]:
    """One saturation pass with no time budget: (jobs claimed, futures written, gaps recorded).

    `now` overrides the database clock (tests only): it calls the internal `_at` functions,
    which only the owner or a superuser may execute; by default the public functions use the
    transaction's now()."""
    p = await saturate_pass(conn, batch=batch, horizon=horizon, grace=grace, now=now)
    return p.claimed, p.futures, p.missed


async def saturate_pass(conn: psycopg.AsyncConnection, *, batch: int, horizon: timedelta,
                        grace: timedelta, now: datetime | None = None, budget: float | None = None,
                        catch_up: bool = True, scale: float = 1.0, late_scale: float | None = None,
                        hold: float | None = None, bucket: int | None = None) -> Pass:
    """One saturation pass; with `budget` (seconds, counted from the claim), computed in a
    worker thread and cut when the budget is spent (the jobs not reached wait for the next
    pass); with `hold` too, a computation still running `hold` seconds after the claim gives
    the jobs' locks up (nothing written) and goes on without them; its jobs are then locked
    again (cronbox.relock_saturation) and those whose row did not change are stored. Without
    `catch_up`, jobs with fires already due are left for a later pass; `scale` and
    `late_scale` size the pass's caps on fires and catch-up fires (poller.plan.plan_jobs).
    With `bucket`, only that bucket's jobs (a poller leasing buckets); None: every bucket.
    The Pass says how long it took, claim to last commit."""
    t0 = time.monotonic()
    p = await _pass(conn, batch, horizon, grace, now, budget, catch_up, scale, late_scale, t0, hold, bucket)
    p.seconds = time.monotonic() - t0
    return p


_CLOCK_COLUMNS = ("now", "catchup_from")  # what claim_saturation adds from the clock


async def _pass(conn: psycopg.AsyncConnection, batch: int, horizon: timedelta, grace: timedelta,
                now: datetime | None, budget: float | None, catch_up: bool, scale: float,
                late_scale: float | None, t0: float, hold: float | None, bucket: int | None) -> Pass:
    computing: asyncio.Future[Planned] | None = None
    async with conn.transaction():
        cur = conn.cursor(row_factory=job_row)
        await store.claim_saturation(cur, batch, horizon, now, bucket)
        claimed = cur.rowcount
        jobs, bad = await _fetch_jobs(cur)
        if not jobs and not bad:
            return Pass()
        if jobs:
            db_now = jobs[0].now
        else:
            db_now = await store.database_now(conn, now)
        if budget is None:
            planned = plan_jobs(jobs, db_now, horizon, grace, None)
        else:
            # the budget counts from the claim: the locks are held from there (a claim slowed
            # by a loaded machine leaves less time to compute)
            computing = asyncio.ensure_future(asyncio.to_thread(
                plan_jobs, jobs, db_now, horizon, grace, budget - (time.monotonic() - t0), catch_up, scale,
                late_scale))
            # (the budget is checked between jobs: one job's computation, the first of a new
            # expression or a year of catch-up on a loaded machine, may outlast it)
            wait = None if hold is None else max(0.0, t0 + hold - time.monotonic())
            done, _ = await asyncio.wait({computing}, timeout=wait)
            if done:
                planned, computing = computing.result(), None
        if computing is None:
            return await _store(conn, planned, bad, claimed, len(jobs), db_now, now, _buckets(jobs))
    # the claim's transaction ended with nothing written (its locks released); computing goes on
    return await _relocked(conn, computing, jobs, bad, claimed, db_now, now)


def _by_bucket(ids: Sequence[int], jobs: dict[int, Job]) -> dict[int, list[int]]:
    """The job ids grouped by their job's bucket (as the claim returned it), in order."""
    out: dict[int, list[int]] = {}
    for job_id in ids:
        out.setdefault(jobs[job_id].bucket, []).append(job_id)
    return out


async def _relocked(conn: psycopg.AsyncConnection, computing: asyncio.Future[Planned], jobs: list[Job],
                    bad: list[tuple[int, str]], claimed: int, db_now: datetime, now: datetime | None) -> Pass:
    """The end of a pass whose computation outlasted its hold (the claim's transaction has
    ended, having written nothing): the computed jobs are locked again and stored where their
    row is as it was computed from."""
    planned = await computing
    async with conn.transaction():
        was = {job.job_id: job for job in jobs}
        ids = [*planned.plan.job, *(job_id for job_id, _ in planned.bad)]
        unchanged: set[int] = set()
        for bucket, of_bucket in _by_bucket(ids, was).items():  # one relock per bucket (docs/citus.md)
            unchanged |= {row["job_id"] for row in await store.relock_saturation(conn, of_bucket, bucket)
                          if all(row[k] == v for k, v in was[row["job_id"]]._asdict().items()
                                 if k not in _CLOCK_COLUMNS)}
        kept = [part for part in planned.plan.split() if part.job[0] in unchanged]
        planned = dataclasses.replace(
            planned, plan=Plan.merge(kept), bad=[b for b in planned.bad if b[0] in unchanged],
            handled=len(kept) + sum(b[0] in unchanged for b in planned.bad))
        return await _store(conn, planned, bad, claimed, len(jobs), db_now, now, _buckets(jobs))


def _buckets(jobs: list[Job]) -> dict[int, int]:
    """Each claimed job's bucket."""
    return {job.job_id: job.bucket for job in jobs}


async def _store(conn: psycopg.AsyncConnection, planned: Planned, bad: list[tuple[int, str]], claimed: int,
                 read: int, db_now: datetime, now: datetime | None, buckets: dict[int, int]) -> Pass:
    """Store a computed pass in the caller's transaction (its jobs locked), one call per bucket
    (docs/citus.md: on Citus each is then one shard's; plain PostgreSQL has one bucket);
    quarantine the jobs that could not be read, computed or stored."""
    bad = bad + planned.bad

    first = buckets[planned.plan.job[0]] if planned.plan.job else None

    async def write_bucket(p: Plan, bucket: int | None) -> tuple[int, int]:
        gaps = p.gaps  # without a gap, the per-fire gap arrays are NULL (no per-fire NULLs sent)
        args = [p.fire_job, p.fire_at, p.missed, p.job, p.frontier, p.next_fire, p.finished, None,
                p.gap_last if gaps else None, p.gap_count if gaps else None, p.gap_exact if gaps else None]
        return await store.store_fires(conn, args, None if now is None else db_now, bucket)

    async def write(batch_parts: Sequence[Plan]) -> tuple[int, int]:
        p = Plan.merge(batch_parts) if len(batch_parts) != 1 else batch_parts[0]
        of_pass = {buckets[job_id] for job_id in p.job}
        if len(of_pass) <= 1:  # plain PostgreSQL: always (one bucket); none: isolate's control run
            return await write_bucket(p, next(iter(of_pass), first))
        parts: dict[int, list[Plan]] = {}
        for part in p.split():
            parts.setdefault(buckets[part.job[0]], []).append(part)
        done = [await write_bucket(Plan.merge(of_bucket), bucket) for bucket, of_bucket in parts.items()]
        return sum(d[0] for d in done), sum(d[1] for d in done)

    stored: list[tuple[int, int]] = []
    failed: list[tuple[Plan, str]] = []
    if planned.plan.job:
        try:  # the fast path: the whole batch in one statement per table and bucket (in a savepoint)
            async with conn.transaction():
                stored = [await write([planned.plan])]
        except CONNECTION_ERRORS:
            raise
        except Exception as exc:
            stored, failed = await isolate(conn, planned.plan.split(), write, exc)
    bad += [(part.job[0], f"cannot store fires: {error}") for part, error in failed]
    for job_id, error in bad:
        await quarantine(conn, job_id, error, "saturation", buckets.get(job_id))
    # the rows that could not be read were handled too (quarantined)
    return Pass(claimed, planned.handled + claimed - read, sum(s[0] for s in stored),
                sum(s[1] for s in stored), planned.deferred, planned.computed)
