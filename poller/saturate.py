"""Saturation: keep every active job's fires materialised up to the horizon.

One pass = one transaction: `cronbox.claim_saturation` locks a batch of jobs with less than
half the horizon materialised (SKIP LOCKED: pollers get disjoint jobs), `plan_job()` computes
each job's fires from its frontier (the previous *scheduled* time, never the clock) up to
now + horizon, and `cronbox.store_fires` writes them set-based.

A pass is time-sliced: the fires are computed in a worker thread (the event loop, and with it
dispatch, keeps running), job after job until the pass's budget of time or fires is spent;
the jobs not reached are left as they were and their locks end with the pass, so the next
pass takes them. No pass holds its jobs' locks much longer than the budget, and a long
catch-up advances over several passes (at most MAX_FIRES_PER_JOB futures per job per pass). Everything here is arithmetic
on what the database returned; the only clock is the database's (`now` and the catch-up
window start come back from the claim).

Catch-up is bounded: fires older than now - misfire grace are late, and the job's policy
decides from where fires are replayed (skip: none; latest: the most recent late fire; all:
those inside catchup_window, at most CATCHUP_MAX, the most recent). The late fires before
that point are not walked one by one: they become ONE `missed` run row (first fire, last
fire, count), whatever the length of the gap.

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
from poller.fires import CronFires, source
from poller.quarantine import CONNECTION_ERRORS, describe, isolate, quarantine

log = logging.getLogger("cronbox.poller")

MAX_FIRES_PER_JOB = 1000  # futures per job per pass; a longer run continues in the next pass
CATCHUP_MAX = 1000        # catchup => 'all' replays at most this many late fires per gap
CRON_COUNT_MAX = 10000    # late cron fires walked to count a gap; beyond, the count is "at least"
FIRES_PER_PASS = 5000     # fires computed per pass before the rest of the batch waits for the next
LATE_PER_PASS = 1000      # catch-up fires (already due when stored) per pass: the queue ahead of
                          # another job's due fire grows by at most this much per pass
_TINY = timedelta(microseconds=1)


@dataclasses.dataclass
class Plan:
    """One pass (or one job's part of it), as the parallel arrays cronbox.store_fires takes.
    Per fire: job, fire_at, missed; a missed entry is a gap: fire_at is its first fire,
    gap_last its last and gap_count how many (a lower bound when gap_exact is False)."""

    fire_job: list[int] = dataclasses.field(default_factory=list)
    fire_at: list[datetime] = dataclasses.field(default_factory=list)
    missed: list[bool] = dataclasses.field(default_factory=list)
    gap_last: list[datetime | None] = dataclasses.field(default_factory=list)
    gap_count: list[int | None] = dataclasses.field(default_factory=list)
    gap_exact: list[bool | None] = dataclasses.field(default_factory=list)
    job: list[int] = dataclasses.field(default_factory=list)
    frontier: list[datetime | None] = dataclasses.field(default_factory=list)
    next_fire: list[datetime | None] = dataclasses.field(default_factory=list)
    finished: list[bool] = dataclasses.field(default_factory=list)

    def add_fire(self, job_id: int, fire: datetime) -> None:
        self.fire_job.append(job_id), self.fire_at.append(fire), self.missed.append(False)
        self.gap_last.append(None), self.gap_count.append(None), self.gap_exact.append(None)

    def add_gap(self, job_id: int, first: datetime, last: datetime, count: int, exact: bool) -> None:
        self.fire_job.append(job_id), self.fire_at.append(first), self.missed.append(True)
        self.gap_last.append(last), self.gap_count.append(count), self.gap_exact.append(exact)

    @staticmethod
    def merge(parts: Sequence[Plan]) -> Plan:
        out = Plan()
        for p in parts:
            for f in dataclasses.fields(Plan):
                getattr(out, f.name).extend(getattr(p, f.name))
        return out


def plan_job(job: dict[str, Any], now: datetime, horizon: timedelta, grace: timedelta,
             max_fires: int = MAX_FIRES_PER_JOB) -> Plan:
    """One job's fires, missed gap and new frontier. Raises on anything it cannot compute."""
    out = Plan()
    job_id = job["job_id"]
    until = now + horizon
    late_before = now - grace
    kind = job["kind"]
    starts_at: datetime | None = job["starts_at"]
    ends_at: datetime | None = job["ends_at"]
    frontier: datetime | None = job["frontier"]
    fixed_delay = kind == "every" and job["every_mode"] == "fixed_delay"
    if fixed_delay:
        # One fire at a time: the next comes from cronbox.schedule_next_fixed_delay.
        anchor = job["anchor"]
        if anchor is not None and (frontier is None or anchor > frontier):
            if anchor > until:
                out.job.append(job_id), out.frontier.append(frontier)
                out.next_fire.append(anchor), out.finished.append(False)
                return out
            if ends_at is None or anchor <= ends_at:
                out.add_fire(job_id, anchor)
                frontier = anchor
        out.job.append(job_id), out.frontier.append(frontier)
        out.next_fire.append(None), out.finished.append(False)
        return out
    if kind == "after":  # fired by its upstream jobs, nothing to materialise
        out.job.append(job_id), out.frontier.append(frontier)
        out.next_fire.append(None), out.finished.append(False)
        return out
    src = source(job)
    after = frontier
    if starts_at is not None and (after is None or after < starts_at - _TINY):
        after = starts_at - _TINY  # never a fire before the start
    stop = late_before if ends_at is None else min(late_before, ends_at + _TINY)
    # 1. The late fires the policy drops become one gap row; nothing before `replay_from` runs.
    policy = job["catchup"]
    replay_from: datetime | None = None
    # (a walk back never goes below the frontier, nor for 'all' below the window's start)
    if policy == "latest":
        replay_from = src.prev(stop, 1, after)
    elif policy == "all":
        window_start = job["catchup_from"]  # now - catchup_window, computed by the database
        nth = src.prev(stop, CATCHUP_MAX, window_start if after is None else max(window_start, after))
        replay_from = max(window_start, nth) if nth is not None else window_start
    if replay_from is None or replay_from > stop:
        replay_from = stop
    count, last, exact = src.span(after, replay_from, CRON_COUNT_MAX)
    if count:
        first = next(iter(src.iterate(after)))
        out.add_gap(job_id, first, last, count, exact)
        after = last
        frontier = last
    # 2. Fires from there up to the horizon (at most max_fires), as futures.
    finished = True
    next_fire: datetime | None = None
    n = 0
    if isinstance(src, CronFires):  # memoised per (frontier, until): jobs sharing an expression share it
        fires, following = src.sched.window(after, until, max_fires + 1)
        candidates = list(fires) + ([following] if following is not None else [])
    else:
        candidates = src.iterate(after)
    for fire in candidates:
        if ends_at is not None and fire > ends_at:
            break
        if fire > until or n >= max_fires:
            next_fire, finished = fire, False
            break
        out.add_fire(job_id, fire)
        frontier = fire
        n += 1
    out.job.append(job_id), out.frontier.append(frontier)
    out.next_fire.append(next_fire), out.finished.append(finished)
    return out


async def _fetch_jobs(cur: psycopg.AsyncCursor[Any]) -> tuple[list[dict[str, Any]], list[tuple[int, str]]]:
    """The claimed rows; a row psycopg cannot load (a BC date, a value out of Python's range)
    is reported by job id (read raw from the result) instead of failing the pass."""
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

    @property
    def cut(self) -> bool:
        """The budget ended the pass before every claimed job was computed."""
        return self.planned + self.deferred < self.claimed


def _late(part: Plan, now: datetime) -> int:
    return sum(1 for at, missed in zip(part.fire_at, part.missed) if not missed and at < now)


def plan_jobs(jobs: Sequence[dict[str, Any]], now: datetime, horizon: timedelta, grace: timedelta,
              budget: float | None, catch_up: bool = True) -> tuple[list[Plan], list[tuple[int, str]], int, int]:
    """Plans for the jobs in order until `budget` seconds, FIRES_PER_PASS fires or
    LATE_PER_PASS catch-up fires are spent (at least one job): (plans, [(job, error)], jobs
    handled, jobs deferred). Without `catch_up` (dispatch has a backlog), a job whose plan holds
    fires already due is deferred: nothing written, the next pass takes it again. Pure
    computation: it runs in a worker thread."""
    parts: list[Plan] = []
    bad: list[tuple[int, str]] = []
    deadline = None if budget is None else time.monotonic() + budget
    fires = late = handled = deferred = 0
    for job in jobs:
        if handled + deferred and (fires >= FIRES_PER_PASS or late >= LATE_PER_PASS
                                   or (deadline is not None and time.monotonic() > deadline)):
            break
        since = job["frontier"] or job["starts_at"]
        if not catch_up and since is not None and since < now - horizon:  # catching up: not computed
            deferred += 1
            continue
        try:
            part = plan_job(job, now, horizon, grace)
        except Exception as exc:  # whatever the row holds, the others go on
            handled += 1
            bad.append((job["job_id"], f"cannot compute fires: {describe(exc)}"))
            continue
        n_late = _late(part, now) if budget is not None else 0
        if n_late and not catch_up:
            deferred += 1
            continue
        handled += 1
        parts.append(part)
        fires += len(part.fire_at)
        late += n_late
    return parts, bad, handled, deferred


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
                        catch_up: bool = True) -> Pass:
    """One saturation pass in one transaction; with `budget` (seconds), computed in a worker
    thread and cut when the budget is spent (the jobs not reached wait for the next pass);
    without `catch_up`, jobs with fires already due are left for a later pass."""
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
        if budget is None:
            parts, failed_plans, handled, deferred = plan_jobs(jobs, db_now, horizon, grace, None)
        else:
            parts, failed_plans, handled, deferred = await asyncio.to_thread(
                plan_jobs, jobs, db_now, horizon, grace, budget, catch_up)
        bad += failed_plans

        async def write(batch_parts: Sequence[Plan]) -> tuple[int, int]:
            p = Plan.merge(batch_parts)
            args = [p.fire_job, p.fire_at, p.missed, p.job, p.frontier, p.next_fire, p.finished,
                    [None] * len(p.job), p.gap_last, p.gap_count, p.gap_exact]
            return await store.store_fires(conn, args, None if now is None else db_now)

        try:  # the fast path: the whole batch in one statement (in a savepoint)
            async with conn.transaction():
                stored, failed = [await write(parts)], []
        except CONNECTION_ERRORS:
            raise
        except Exception as exc:
            stored, failed = await isolate(conn, parts, write, exc)
        bad += [(part.job[0], f"cannot store fires: {error}") for part, error in failed]
        for job_id, error in bad:
            await quarantine(conn, job_id, error, "saturation")
        # the rows that could not be read were handled too (quarantined)
        return Pass(claimed, handled + claimed - len(jobs), sum(s[0] for s in stored), sum(s[1] for s in stored),
                    deferred)
