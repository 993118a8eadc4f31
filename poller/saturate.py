"""Saturation: keep every active job's fires materialised up to the horizon.

One pass = one transaction: `cronbox.claim_saturation` takes the lock of a batch of jobs with
less than half the horizon materialised (SKIP LOCKED: pollers get disjoint jobs),
poller/plan.py computes their fires from each frontier (the previous *scheduled* time, never
the clock) up to now + horizon, and `cronbox.store_fires` writes them set-based, one
statement per table for the whole pass.

A pass is time-sliced: the fires are computed in a worker thread (the event loop, and with it
dispatch, keeps running), job after job until the pass's budget of time or fires is spent;
the jobs not reached are left as they were and their locks end with the pass, so the next
pass takes them. No pass holds its jobs' locks much longer than the budget, and a long
catch-up advances over several passes (at most MAX_FIRES_PER_JOB futures per job per pass).
The caller sizes passes by time (poller.main.PassSizer: each Pass says how long, claim to
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
from typing import Any

import psycopg
from psycopg.rows import dict_row

from poller import store
from poller.plan import Plan, plan_jobs
from poller.quarantine import CONNECTION_ERRORS, describe, isolate, quarantine

log = logging.getLogger("cronbox.poller")


async def _fetch_jobs(cur: psycopg.AsyncCursor[Any]) -> tuple[list[dict[str, Any]], list[tuple[int, str]]]:
    """The claimed rows; a row psycopg cannot load (a BC date, a value out of Python's range)
    is reported by job id (read raw from the result) instead of failing the pass."""
    try:  # all at once; row by row only when a row cannot be loaded
        return await cur.fetchall(), []
    except CONNECTION_ERRORS:
        raise
    except Exception:
        await cur.scroll(0, mode="absolute")
    jobs: list[dict[str, Any]] = []
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
                        catch_up: bool = True, scale: float = 1.0, late_scale: float | None = None) -> Pass:
    """One saturation pass in one transaction; with `budget` (seconds), computed in a worker
    thread and cut when the budget is spent (the jobs not reached wait for the next pass);
    without `catch_up`, jobs with fires already due are left for a later pass; `scale` and
    `late_scale` size the pass's caps on fires and catch-up fires (poller.plan.plan_jobs). The Pass says how long it held its locks."""
    t0 = time.monotonic()
    p = await _pass(conn, batch, horizon, grace, now, budget, catch_up, scale, late_scale)
    p.seconds = time.monotonic() - t0
    return p


async def _pass(conn: psycopg.AsyncConnection, batch: int, horizon: timedelta, grace: timedelta,
                now: datetime | None, budget: float | None, catch_up: bool, scale: float,
                late_scale: float | None) -> Pass:
    async with conn.transaction():
        cur = conn.cursor(row_factory=dict_row)
        await store.claim_saturation(cur, batch, horizon, now)
        claimed = cur.rowcount
        jobs, bad = await _fetch_jobs(cur)
        if not jobs and not bad:
            return Pass()
        if jobs:
            db_now = jobs[0]["now"]
        else:
            db_now = await store.database_now(conn, now)
        planned = (plan_jobs(jobs, db_now, horizon, grace, None) if budget is None else
                   await asyncio.to_thread(plan_jobs, jobs, db_now, horizon, grace, budget, catch_up, scale,
                                                   late_scale))
        bad += planned.bad

        async def write(batch_parts: Sequence[Plan]) -> tuple[int, int]:
            p = Plan.merge(batch_parts) if len(batch_parts) != 1 else batch_parts[0]
            gaps = p.gaps  # without a gap, the per-fire gap arrays are NULL (no per-fire NULLs sent)
            args = [p.fire_job, p.fire_at, p.missed, p.job, p.frontier, p.next_fire, p.finished, None,
                    p.gap_last if gaps else None, p.gap_count if gaps else None, p.gap_exact if gaps else None]
            return await store.store_fires(conn, args, None if now is None else db_now)

        try:  # the fast path: the whole batch in one statement per table (in a savepoint)
            async with conn.transaction():
                stored, failed = [await write([planned.plan])], []
        except CONNECTION_ERRORS:
            raise
        except Exception as exc:
            stored, failed = await isolate(conn, planned.plan.split(), write, exc)
        bad += [(part.job[0], f"cannot store fires: {error}") for part, error in failed]
        for job_id, error in bad:
            await quarantine(conn, job_id, error, "saturation")
        # the rows that could not be read were handled too (quarantined)
        return Pass(claimed, planned.handled + claimed - len(jobs), sum(s[0] for s in stored),
                    sum(s[1] for s in stored), planned.deferred, planned.computed)
