"""Saturation: keep every active job's fires materialised up to the horizon.

One pass = one transaction: `cronbox.claim_saturation` locks a batch of jobs with less than
half the horizon materialised (SKIP LOCKED: pollers get disjoint jobs), `plan()` computes
their fires from each job's frontier (the previous *scheduled* time, never the clock) up to
now + horizon, and `cronbox.store_fires` writes them set-based. Fires older than
now - misfire grace are late: the job's catch-up policy sorts them into futures and `missed`
history rows. Everything here is pure arithmetic on what the database returned; the only
clock is the database's (`now` comes back from the claim).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row

from poller.cron import CronError, schedule_for

MAX_FIRES_PER_JOB = 1000  # per pass; a longer backlog continues in the next pass
_TINY = timedelta(microseconds=1)


@dataclasses.dataclass
class Plan:
    """One pass, as the parallel arrays cronbox.store_fires takes."""

    fire_job: list[int] = dataclasses.field(default_factory=list)
    fire_at: list[datetime] = dataclasses.field(default_factory=list)
    missed: list[bool] = dataclasses.field(default_factory=list)
    job: list[int] = dataclasses.field(default_factory=list)
    frontier: list[datetime | None] = dataclasses.field(default_factory=list)
    next_fire: list[datetime | None] = dataclasses.field(default_factory=list)
    finished: list[bool] = dataclasses.field(default_factory=list)
    error: list[str | None] = dataclasses.field(default_factory=list)

    def args(self) -> tuple[Any, ...]:
        return (self.fire_job, self.fire_at, self.missed, self.job, self.frontier,
                self.next_fire, self.finished, self.error)


def _candidates(job: dict[str, Any], after: datetime | None, until: datetime,
                limit: int) -> Iterator[datetime]:
    """Fires strictly after `after`, oldest first; stops at most one fire past `until`."""
    kind = job["kind"]
    if kind == "at":
        if after is None or job["at"] > after:
            yield job["at"]
        return
    if kind == "every" and job["every_mode"] == "fixed_delay":
        # One fire at a time: the next comes from cronbox.schedule_next_fixed_delay.
        if job["anchor"] is not None and (after is None or job["anchor"] > after):
            yield job["anchor"]
        return
    if kind == "every":
        anchor: datetime = job["anchor"]
        step: timedelta = job["every"]
        k = 0 if after is None or after < anchor else (after - anchor) // step + 1
        while True:
            fire = anchor + k * step
            yield fire
            if fire > until:
                return
            k += 1
    if kind == "cron":
        sched = schedule_for(job["cron_normalized"], job["timezone"])
        assert after is not None, "cron jobs always have a frontier"
        fires, following = sched.window(after, until, limit)
        yield from fires
        if len(fires) < limit and following is not None:
            yield following


def _keep(job: dict[str, Any], fire: datetime, following: datetime | None,
          now: datetime, late_before: datetime) -> bool:
    """Catch-up policy for one fire: True = materialise it, False = record it missed."""
    if fire >= late_before or (job["kind"] == "every" and job["every_mode"] == "fixed_delay"):
        return True
    policy = job["catchup"]
    if policy == "all":
        return fire >= now - job["catchup_window"]
    if policy == "latest":  # only the most recent late fire runs
        return following is None or following >= late_before
    return False  # skip


def plan_job(job: dict[str, Any], now: datetime, horizon: timedelta, grace: timedelta,
             out: Plan, max_fires: int = MAX_FIRES_PER_JOB) -> None:
    """Append one job's fires and new frontier to `out`."""
    until = now + horizon
    late_before = now - grace
    starts_at: datetime | None = job["starts_at"]
    ends_at: datetime | None = job["ends_at"]
    frontier: datetime | None = job["frontier"]
    after = frontier
    if starts_at is not None and job["kind"] == "cron" and (after is None or after < starts_at - _TINY):
        after = starts_at - _TINY  # never iterate through fires before the start
    fires: list[datetime] = []
    next_fire: datetime | None = None
    # Finished = no fire is left ever: the expression ran out or ends_at was passed. A fixed
    # delay job whose one fire is handled is not finished: it waits for its run to end.
    finished = not (job["kind"] == "every" and job["every_mode"] == "fixed_delay")
    for fire in _candidates(job, after, until, max_fires + 1):
        if ends_at is not None and fire > ends_at:
            finished = True
            break
        if fire > until or len(fires) >= max_fires:
            next_fire, finished = fire, False
            break
        if starts_at is not None and fire < starts_at:
            frontier = fire
            continue
        fires.append(fire)
    for i, fire in enumerate(fires):
        following = fires[i + 1] if i + 1 < len(fires) else next_fire
        out.fire_job.append(job["job_id"])
        out.fire_at.append(fire)
        out.missed.append(not _keep(job, fire, following, now, late_before))
        frontier = fire
    out.job.append(job["job_id"])
    out.frontier.append(frontier)
    out.next_fire.append(next_fire)
    out.finished.append(finished)
    out.error.append(None)


def plan(jobs: Sequence[dict[str, Any]], now: datetime, horizon: timedelta, grace: timedelta,
         max_fires: int = MAX_FIRES_PER_JOB) -> Plan:
    """Compute one pass for the claimed jobs. A job whose fires cannot be computed (e.g. a
    time zone this machine's tzdata lacks) is reported in `error`: store_fires pauses it."""
    out = Plan()
    for job in jobs:
        mark = len(out.fire_job)
        try:
            plan_job(job, now, horizon, grace, out, max_fires)
        except (CronError, ValueError, OverflowError) as exc:
            del out.fire_job[mark:], out.fire_at[mark:], out.missed[mark:]
            out.job.append(job["job_id"])
            out.frontier.append(None)
            out.next_fire.append(None)
            out.finished.append(False)
            out.error.append(str(exc) or exc.__class__.__name__)
    return out


async def saturate_once(conn: psycopg.AsyncConnection, *, batch: int, horizon: timedelta,
                        grace: timedelta, now: datetime | None = None) -> tuple[int, int, int]:
    """One saturation pass in one transaction: (jobs claimed, futures written, fires missed).

    `now` overrides the database clock (tests only): it calls the internal `_at` functions,
    which only the owner or a superuser may execute; by default the public functions use the
    transaction's now()."""
    async with conn.transaction():
        cur = conn.cursor(row_factory=dict_row)
        if now is None:
            await cur.execute("SELECT * FROM cronbox.claim_saturation(%s, %s)", (batch, horizon))
        else:
            await cur.execute("SELECT * FROM cronbox.claim_saturation_at(%s, %s, %s)", (batch, horizon, now))
        jobs = await cur.fetchall()
        if not jobs:
            return 0, 0, 0
        db_now = jobs[0]["now"]
        p = plan(jobs, db_now, horizon, grace)
        if now is None:
            await cur.execute(
                "SELECT futures, missed FROM cronbox.store_fires(%s, %s, %s, %s, %s, %s, %s, %s)", p.args())
        else:
            await cur.execute(
                "SELECT futures, missed FROM cronbox.store_fires_at(%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (*p.args(), db_now))
        row = await cur.fetchone()
        assert row is not None
        return len(jobs), row["futures"], row["missed"]
