"""Planning a saturation pass: each claimed job's fires, missed gap and new frontier, as the
parallel arrays cronbox.store_fires takes. Pure computation on what the claim returned (the
only clock is the database's `now`); it runs in a worker thread.

One engine: `outcome()` computes one job from its schedule and its previous scheduled time
(poller/fires.py, poller/cron.py, the same code that `cronbox.preview` is proven equal to).
A pass computes each distinct question once: jobs that share every input of `outcome()`
(expression, time zone, frontier, window, catch-up policy) share its answer, so a million
schedules on a few hundred expressions cost a few hundred computations per pass. Interval
jobs (distinct anchors, rarely shared) are arithmetic and not memoised.

Catch-up is bounded: fires older than now - misfire grace are late, and the job's policy
decides from where fires are replayed (skip: none; latest: the most recent late fire; all:
those inside catchup_window, at most CATCHUP_MAX, the most recent). The late fires before
that point are not walked one by one: they become ONE `missed` run row (first fire, last
fire, count), whatever the length of the gap.
"""

from __future__ import annotations

import dataclasses
import time
from bisect import bisect_left
from collections.abc import Sequence
from datetime import datetime, timedelta
from itertools import repeat
from operator import itemgetter
from typing import Any, NamedTuple

from poller.fires import CronFires, source
from poller.quarantine import describe
from poller.store import Job

MAX_FIRES_PER_JOB = 1000  # futures per job per pass (times the pass's scale, at least
                          # MIN_FIRES_PER_JOB); a longer run continues in the next pass
MIN_FIRES_PER_JOB = 50
CATCHUP_MAX = 1000        # catchup => 'all' replays at most this many late fires per gap
CRON_COUNT_MAX = 10000    # late cron fires walked to count a gap; beyond, the count is "at least"
FIRES_PER_PASS = 10000    # fires computed per pass before the rest of the batch waits for the next
LATE_PER_PASS = 1000      # catch-up fires (_catch_up: replayed from before the misfire grace) per
                          # pass: the queue ahead of another job's due fire grows by at most this
                          # much per pass
_TINY = timedelta(microseconds=1)


class Outcome(NamedTuple):
    """One job's share of a pass, whoever the job is."""
    fires: tuple[datetime, ...]           # futures to store, oldest first
    gap: tuple[datetime, datetime, int, bool] | None  # missed: first, last, count, exact
    frontier: datetime | None             # the last fire handled (the previous scheduled time)
    next_fire: datetime | None            # the next fire to materialise, None: none for now
    finished: bool                        # no fire is left, ever


@dataclasses.dataclass
class Plan:
    """One pass (or one job's part of it), as the parallel arrays cronbox.store_fires takes, its
    jobs in ascending id order (plan_jobs; split and merge keep the order).
    Per fire: job, fire_at, missed; a missed entry is a gap: fire_at is its first fire,
    gap_last its last and gap_count how many (a lower bound when gap_exact is False).
    `entries[k]`: how many fire entries job[k] has (they are contiguous, in job order)."""

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
    entries: list[int] = dataclasses.field(default_factory=list)

    def add(self, job_id: int, o: Outcome) -> None:
        n = len(o.fires)
        if o.gap is not None:
            first, last, count, exact = o.gap
            self.fire_job.append(job_id), self.fire_at.append(first), self.missed.append(True)
            self.gap_last.append(last), self.gap_count.append(count), self.gap_exact.append(exact)
        if n:
            self.fire_job.extend(repeat(job_id, n)), self.fire_at.extend(o.fires)
            self.missed.extend(repeat(False, n)), self.gap_last.extend(repeat(None, n))
            self.gap_count.extend(repeat(None, n)), self.gap_exact.extend(repeat(None, n))
        self.job.append(job_id), self.frontier.append(o.frontier)
        self.next_fire.append(o.next_fire), self.finished.append(o.finished)
        self.entries.append(n + (o.gap is not None))

    @property
    def gaps(self) -> bool:
        return any(self.missed)

    def split(self) -> list[Plan]:
        """One Plan per job (to find the job whose fires cannot be stored)."""
        parts, pos = [], 0
        names = [f.name for f in dataclasses.fields(Plan) if f.name not in ("job", "frontier", "next_fire",
                                                                              "finished", "entries")]
        for k, n in enumerate(self.entries):
            p = Plan(job=[self.job[k]], frontier=[self.frontier[k]], next_fire=[self.next_fire[k]],
                     finished=[self.finished[k]], entries=[n])
            for name in names:
                getattr(p, name).extend(getattr(self, name)[pos:pos + n])
            parts.append(p)
            pos += n
        return parts

    @staticmethod
    def merge(parts: Sequence[Plan]) -> Plan:
        out = Plan()
        for p in parts:
            for f in dataclasses.fields(Plan):
                getattr(out, f.name).extend(getattr(p, f.name))
        return out


def outcome(job: Job, now: datetime, horizon: timedelta, grace: timedelta,
            max_fires: int = MAX_FIRES_PER_JOB) -> Outcome:
    """One job's fires, missed gap and new frontier. Raises on anything it cannot compute."""
    until = now + horizon
    late_before = now - grace
    kind = job.kind
    starts_at: datetime | None = job.starts_at
    ends_at: datetime | None = job.ends_at
    frontier: datetime | None = job.frontier
    if kind == "every" and job.every_mode == "fixed_delay":
        # One fire at a time: the next comes from cronbox.schedule_next_fixed_delay.
        anchor = job.anchor
        if anchor is not None and (frontier is None or anchor > frontier):
            if anchor > until:
                return Outcome((), None, frontier, anchor, False)
            if ends_at is None or anchor <= ends_at:
                return Outcome((anchor,), None, anchor, None, False)
        return Outcome((), None, frontier, None, False)
    if kind == "after":  # fired by its upstream jobs, nothing to materialise
        return Outcome((), None, frontier, None, False)
    src = source(job)
    after = frontier
    if starts_at is not None and (after is None or after < starts_at - _TINY):
        after = starts_at - _TINY  # never a fire before the start
    stop = late_before if ends_at is None else min(late_before, ends_at + _TINY)
    # 1. The late fires the policy drops become one gap row; nothing before `replay_from` runs.
    policy = job.catchup
    replay_from: datetime | None = None
    # (a walk back never goes below the frontier, nor for 'all' below the window's start)
    if policy == "latest":
        replay_from = src.prev(stop, 1, after)
    elif policy == "all":
        window_start = job.catchup_from  # now - catchup_window, computed by the database
        nth = src.prev(stop, CATCHUP_MAX, window_start if after is None else max(window_start, after))
        replay_from = max(window_start, nth) if nth is not None else window_start
    if replay_from is None or replay_from > stop:
        replay_from = stop
    gap = None
    count, last, exact = src.span(after, replay_from, CRON_COUNT_MAX)
    if count:
        gap = (next(iter(src.iterate(after))), last, count, exact)
        after = frontier = last
    # 2. Fires from there up to the horizon (at most max_fires), as futures.
    if isinstance(src, CronFires):  # memoised per (frontier, until) in the expression's schedule
        window, following = src.sched.window(after, until, max_fires + 1)
        candidates = iter(window + ((following,) if following is not None else ()))
    else:
        candidates = src.iterate(after)
    fires: list[datetime] = []
    for fire in candidates:
        if ends_at is not None and fire > ends_at:
            break
        if fire > until or len(fires) >= max_fires:
            return Outcome(tuple(fires), gap, fires[-1] if fires else frontier, fire, False)
        fires.append(fire)
    return Outcome(tuple(fires), gap, fires[-1] if fires else frontier, None, True)


def _catch_up(fires: tuple[datetime, ...], late_before: datetime) -> int:
    """The fires of a plan that replay a catch-up: those older than the misfire grace beyond
    the most recent of them. A fire inside the grace is on time (a little late), and one
    fire from before it is what catchup => 'latest' replays; only catchup => 'all' replays
    more (a new schedule the poller reaches late replays at most one: it is not deferred
    behind dispatch's backlog, nor counted against the pass's allowance of catch-up fires)."""
    if not fires or fires[0] >= late_before:
        return 0
    return max(0, bisect_left(fires, late_before) - 1)


def _key(job: Job) -> tuple[Any, ...] | None:
    """Everything outcome() reads from a job, or None for a job not worth memoising (an
    interval or a one-off: its anchor is its own)."""
    if job.kind != "cron":
        return None
    return (job.cron_normalized, job.timezone, job.frontier, job.starts_at, job.ends_at,
            job.catchup, job.catchup_from if job.catchup == "all" else None)


@dataclasses.dataclass
class Planned:
    plan: Plan
    bad: list[tuple[int, str]]   # (job, why its fires cannot be computed)
    handled: int                 # jobs computed (or found broken)
    deferred: int                # jobs left for a later pass (catch-up while dispatch is behind)
    computed: int                # distinct computations (the others were shared)


def plan_jobs(jobs: Sequence[Job], now: datetime, horizon: timedelta, grace: timedelta,
              budget: float | None, catch_up: bool = True, scale: float = 1.0,
              late_scale: float | None = None) -> Planned:
    """The jobs in order until `budget` seconds, FIRES_PER_PASS fires times `scale` (a pass
    sized down by time) or LATE_PER_PASS catch-up fires times `late_scale` (default `scale`;
    passes in flight at once share the allowance) are spent (at least one job). Without
    `catch_up` (dispatch has a backlog), a job whose plan replays a catch-up (_catch_up: more
    than the latest fire from before the misfire grace) is deferred: nothing written, the next
    pass takes it again. A job the poller reaches late (a million new schedules saturating
    from empty) replays at most its latest fire and is never deferred: deferring it would only
    turn its fires into missed ones."""
    done: list[tuple[int, Outcome]] = []
    bad: list[tuple[int, str]] = []
    memo: dict[tuple[Any, ...], tuple[Outcome, int] | BaseException] = {}
    deadline = None if budget is None else time.monotonic() + budget
    fires = late = handled = deferred = computed = 0
    late_scale = scale if late_scale is None else late_scale
    max_fires, max_late = max(1, int(FIRES_PER_PASS * scale)), max(1, int(LATE_PER_PASS * late_scale))
    # one job's share shrinks with the pass too: the job a pass always computes (at least one)
    # is what a pass sized down to one job stores and holds its lock for
    per_job = max(MIN_FIRES_PER_JOB, int(MAX_FIRES_PER_JOB * min(scale, 1.0)))
    for job in jobs:
        if handled + deferred and (fires >= max_fires or late >= max_late
                                   or (deadline is not None and time.monotonic() > deadline)):
            break
        since = job.frontier or job.starts_at
        if (not catch_up and job.catchup == "all" and since is not None
                and since < now - horizon):  # replaying a long catch-up: not computed
            deferred += 1
            continue
        key = _key(job)
        hit = memo.get(key) if key is not None else None
        if hit is None:
            computed += 1
            try:
                o = outcome(job, now, horizon, grace, per_job)
                hit = (o, _catch_up(o.fires, now - grace))
            except Exception as exc:  # whatever the row holds, the others go on
                hit = exc
            if key is not None:
                memo[key] = hit
        if isinstance(hit, BaseException):
            handled += 1
            bad.append((job.job_id, f"cannot compute fires: {describe(hit)}"))
            continue
        o, n_late = hit
        if n_late and budget is not None and not catch_up:
            deferred += 1
            continue
        handled += 1
        done.append((job.job_id, o))
        fires += len(o.fires)
        if budget is not None:
            late += n_late
    plan = Plan()
    for job_id, o in sorted(done, key=itemgetter(0)):  # in job order: cronbox.store_fires checks it
        plan.add(job_id, o)
    return Planned(plan, bad, handled, deferred, computed)
