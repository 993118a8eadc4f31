"""Saturation: keep every active job's fires materialised up to the horizon.

One pass = one transaction: `cronbox.claim_saturation` locks a batch of jobs whose next fire
is inside the horizon (SKIP LOCKED: pollers get disjoint jobs), `plan()` computes their fires
from each job's frontier (the previous *scheduled* time, never the clock), and
`cronbox.store_fires` writes them set-based. Fires in the past are sorted by the job's
catch-up policy into futures and `missed` history rows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row

from poller.cron import CronSchedule

MAX_FIRES_PER_JOB = 1000  # per pass; a longer backlog continues on the next pass


@dataclasses.dataclass
class Plan:
    fire_job: list[int] = dataclasses.field(default_factory=list)
    fire_at: list[datetime] = dataclasses.field(default_factory=list)
    missed: list[bool] = dataclasses.field(default_factory=list)
    job: list[int] = dataclasses.field(default_factory=list)
    frontier: list[datetime | None] = dataclasses.field(default_factory=list)
    next_fire: list[datetime | None] = dataclasses.field(default_factory=list)

    def args(self, now: datetime) -> tuple[Any, ...]:
        return (self.fire_job, self.fire_at, self.missed, self.job, self.frontier, self.next_fire, now)


def _fires(job: dict[str, Any]) -> Iterator[datetime]:
    """Every fire strictly after the job's frontier, in order (unbounded for cron/every)."""
    frontier: datetime | None = job["frontier"]
    kind = job["kind"]
    if kind == "at":
        if frontier is None or job["at"] > frontier:
            yield job["at"]
        return
    if kind == "every":
        anchor: datetime = job["anchor"]
        step: timedelta = job["every"]
        k = 0 if frontier is None or frontier < anchor else (frontier - anchor) // step + 1
        while True:
            yield anchor + k * step
            k += 1
    if kind == "cron":
        sched = CronSchedule(job["cron_normalized"], job["timezone"])
        current = frontier
        while True:
            nxt = sched.next_after(current)
            if nxt is None:
                return
            yield nxt
            current = nxt


def plan(jobs: Sequence[dict[str, Any]], now: datetime, horizon: timedelta, grace: timedelta,
         max_fires: int = MAX_FIRES_PER_JOB) -> Plan:
    """Compute one pass. A fire older than now - grace is late: the catch-up policy decides."""
    out = Plan()
    until = now + horizon
    late_before = now - grace
    for job in jobs:
        ends_at: datetime | None = job["ends_at"]
        starts_at: datetime | None = job["starts_at"]
        window_start = now - job["catchup_window"]
        frontier = job["frontier"]
        next_fire: datetime | None = None
        it = _fires(job)
        pending = next(it, None)
        count = 0
        while pending is not None:
            if (ends_at is not None and pending > ends_at):
                pending = None
                break
            if pending > until or count >= max_fires:
                next_fire = pending
                break
            fire, pending = pending, next(it, None)
            if starts_at is not None and fire < starts_at:
                frontier = fire
                continue
            count += 1
            late = fire < late_before
            if late:
                nxt_late = pending is not None and pending < late_before and (ends_at is None or pending <= ends_at)
                policy = job["catchup"]
                keep = (policy == "latest" and not nxt_late) or (policy == "all" and fire >= window_start)
            else:
                keep = True
            out.fire_job.append(job["job_id"])
            out.fire_at.append(fire)
            out.missed.append(not keep)
            frontier = fire
        out.job.append(job["job_id"])
        out.frontier.append(frontier)
        out.next_fire.append(next_fire)
    return out


async def saturate_once(conn: psycopg.AsyncConnection, *, batch: int, horizon: timedelta,
                        grace: timedelta) -> tuple[int, int, int]:
    """One saturation pass in one transaction: (jobs claimed, futures written, fires missed)."""
    async with conn.transaction():
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute("SELECT * FROM cronbox.claim_saturation(%s, %s)", (batch, horizon))
        jobs = await cur.fetchall()
        if not jobs:
            return 0, 0, 0
        now = jobs[0]["now"]
        p = plan(jobs, now, horizon, grace)
        await cur.execute(
            "SELECT futures, missed FROM cronbox.store_fires(%s, %s, %s, %s, %s, %s, %s)", p.args(now)
        )
        row = await cur.fetchone()
        assert row is not None
        return len(jobs), row["futures"], row["missed"]
