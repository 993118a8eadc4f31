"""Day and wall-clock arithmetic under poller.cron: the days a set of cron day fields matches,
a year at a time and kept per process (`days_for`), the times of a day in order, and the instant
a time zone changes its offset (DST gaps and folds)."""

from __future__ import annotations

import copy
import threading
from bisect import bisect_left
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from zoneinfo import ZoneInfo

from croniter import CroniterBadDateError, croniter

__all__ = ["Days", "as_local", "days_for", "gap_end", "times_from"]

_SECOND = timedelta(seconds=1)


def times_from(hours: tuple[int, ...], minutes: tuple[int, ...], seconds: tuple[int, ...],
                first: tuple[int, int, int]) -> Iterator[tuple[int, int, int]]:
    """The (hour, minute, second) of a day in order, from `first` on (inclusive)."""
    h0, m0, s0 = first
    for h in hours[bisect_left(hours, h0):]:
        mins = minutes[bisect_left(minutes, m0):] if h == h0 else minutes
        for m in mins:
            secs = seconds[bisect_left(seconds, s0):] if h == h0 and m == m0 else seconds
            for sec in secs:
                yield h, m, sec
_SECOND = timedelta(seconds=1)


def as_local(naive_utc: datetime, zone: ZoneInfo) -> datetime:
    """A naive UTC instant as an aware datetime in `zone` (fold set as Python does)."""
    return naive_utc.replace(tzinfo=timezone.utc).astimezone(zone)


def gap_end(zone: ZoneInfo, low: datetime, high: datetime, after_offset: timedelta) -> datetime:
    """The transition instant (naive UTC) in (low, high] where `zone` starts using
    `after_offset` (the first real instant after a spring-forward gap, or the start of a
    fall-back fold). Binary search to the second (transitions fall on whole seconds); runs
    only for wall times next to a DST change."""
    lo, hi = low, high
    while hi - lo > _SECOND:
        mid = lo + (hi - lo) / 2
        mid = mid.replace(microsecond=0)
        if mid <= lo:
            mid = lo + _SECOND
        if as_local(mid, zone).utcoffset() == after_offset:
            hi = mid
        else:
            lo = mid
    return hi


class Days:
    """The matching days (naive midnights) of one set of day fields (day-of-month, month,
    day-of-week, year), asked of croniter a calendar year at a time and kept: every schedule
    with these day fields, whatever its times of day and zone, and every later pass read the
    same lists. A year of a daily schedule's catch-up cost 365 croniter steps (~0.1 s) per job
    and per pass; now once per process."""

    __slots__ = ("_cron", "_years", "_lock")

    YEARS_KEPT = 64

    def __init__(self, day_fields: str) -> None:
        self._cron = croniter("0 0 0 " + day_fields, datetime(1970, 1, 1), ret_type=datetime,
                              second_at_beginning=True, max_years_between_matches=130)
        # year -> (its matching days, the first matching day after it or None: none ever
        # again, an error croniter raised past the days listed, or None)
        self._years: dict[int, tuple[tuple[datetime, ...], datetime | None, Exception | None]] = {}
        self._lock = threading.Lock()

    def _year(self, year: int) -> tuple[tuple[datetime, ...], datetime | None, Exception | None]:
        hit = self._years.get(year)
        if hit is not None:
            return hit
        walk = copy.copy(self._cron)
        walk.set_current(datetime(year, 1, 1) - _SECOND, force=True)
        days: list[datetime] = []
        following: datetime | None = None
        error: Exception | None = None
        while True:
            try:
                day: datetime = walk.get_next(datetime)
            except CroniterBadDateError:  # no match within croniter's 130 years: none left
                break
            except Exception as exc:  # past year 9999, say: raised where the walk gets there
                error = exc
                break
            if day.year != year:
                following = day
                break
            days.append(day)
        hit = (tuple(days), following, error)
        with self._lock:
            if len(self._years) >= self.YEARS_KEPT:
                self._years.clear()
            self._years[year] = hit
        return hit

    def since(self, first: datetime) -> Iterator[datetime]:
        """The matching days from `first` (a naive midnight) on, in order."""
        days, following, error = self._year(first.year)
        yield from days[bisect_left(days, first):]
        while True:
            if error is not None:
                raise error
            if following is None:
                return
            days, following, error = self._year(following.year)
            yield from days


@lru_cache(maxsize=1024)
def days_for(day_fields: str) -> Days:
    return Days(day_fields)
