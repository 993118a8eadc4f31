"""Fire sources for saturation: what the poller needs to know about one job's fire times
without walking them one by one (so catch-up over years of a one-second schedule costs a
bounded number of steps).

Each source answers, from the previous scheduled time (never from the clock):
- ``iterate(after)``: fires strictly after `after`, oldest first;
- ``prev(before, n)``: the n-th fire strictly before `before` counting back (1 = the latest),
  or None when there are fewer than n;
- ``span(after, before, cap)``: (count, last) of the fires in (after, before): counted
  exactly for intervals and one-offs; for cron at most `cap` are walked, then `exact` is
  False and the count is a lower bound.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

from croniter import CroniterBadDateError, croniter

from poller.cron import CronSchedule, schedule_for

_TINY = timedelta(microseconds=1)


class AtFires:
    def __init__(self, at: datetime) -> None:
        if at is None:
            raise ValueError("one-off job has no `at` time")
        self.at = at

    def iterate(self, after: datetime | None) -> Iterator[datetime]:
        if after is None or self.at > after:
            yield self.at

    def prev(self, before: datetime, n: int) -> datetime | None:
        return self.at if n == 1 and self.at < before else None

    def span(self, after: datetime | None, before: datetime, cap: int) -> tuple[int, datetime | None, bool]:
        inside = (after is None or self.at > after) and self.at < before
        return (1, self.at, True) if inside else (0, None, True)


class EveryFires:
    """Fixed rate: anchor + k*every, k >= 0; all arithmetic, no walking."""

    def __init__(self, anchor: datetime, every: timedelta) -> None:
        if anchor is None or every is None:
            raise ValueError("interval job has no anchor or no interval")
        if every <= timedelta(0):
            raise ValueError(f"interval must be positive, got {every}")
        self.anchor, self.every = anchor, every

    def _first_index_after(self, after: datetime | None) -> int:
        if after is None or after < self.anchor:
            return 0
        return (after - self.anchor) // self.every + 1

    def _last_index_before(self, before: datetime) -> int:
        """Largest k with fire(k) < before; -1 if none."""
        if before <= self.anchor:
            return -1
        return (before - self.anchor - _TINY) // self.every

    def iterate(self, after: datetime | None) -> Iterator[datetime]:
        k = self._first_index_after(after)
        while True:
            yield self.anchor + k * self.every  # OverflowError past year 9999: quarantined
            k += 1

    def prev(self, before: datetime, n: int) -> datetime | None:
        k = self._last_index_before(before) - (n - 1)
        return self.anchor + k * self.every if k >= 0 else None

    def span(self, after: datetime | None, before: datetime, cap: int) -> tuple[int, datetime | None, bool]:
        first, last = self._first_index_after(after), self._last_index_before(before)
        if last < first:
            return 0, None, True
        return last - first + 1, self.anchor + last * self.every, True


class CronFires:
    def __init__(self, expr: str, tz: str) -> None:
        self.sched: CronSchedule = schedule_for(expr, tz)

    def iterate(self, after: datetime | None) -> Iterator[datetime]:
        assert after is not None, "cron jobs always have a frontier"
        for fire in self.sched._fires(after):
            yield fire.astimezone(timezone.utc)

    def prev(self, before: datetime, n: int) -> datetime | None:
        # croniter walks backwards; the fall-back duplicate guard of CronSchedule only matters
        # for fixed-hour jobs, whose fires are far apart (n is at most a few thousand).
        it = croniter(self.sched.expr, before.astimezone(self.sched._zone), ret_type=datetime,
                      second_at_beginning=True, max_years_between_matches=130)
        fire = None
        try:
            for _ in range(n):
                fire = it.get_prev(datetime)
        except CroniterBadDateError:
            return None
        return None if fire is None else fire.astimezone(timezone.utc)

    def span(self, after: datetime | None, before: datetime, cap: int) -> tuple[int, datetime | None, bool]:
        count, last = 0, None
        for fire in self.iterate(after):
            if fire >= before:
                return count, last, True
            count, last = count + 1, fire
            if count >= cap:
                break
        else:
            return count, last, True
        # Too many to walk: the last one is found backwards, the count is a lower bound.
        return count, self.prev(before, 1) or last, False


def source(job: dict[str, Any]) -> AtFires | EveryFires | CronFires:
    kind = job["kind"]
    if kind == "at":
        return AtFires(job["at"])
    if kind == "every":
        return EveryFires(job["anchor"], job["every"])
    if kind == "cron":
        if not job["cron_normalized"] or not job["timezone"]:
            raise ValueError("cron job has no expression or no time zone")
        return CronFires(job["cron_normalized"], job["timezone"])
    raise ValueError(f"kind {kind!r} has no schedule to materialise")
