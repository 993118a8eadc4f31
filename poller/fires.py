"""Fire sources for saturation: what the poller needs to know about one job's fire times
without walking them one by one (so catch-up over years of a one-second schedule costs a
bounded number of steps).

Each source answers, from the previous scheduled time (never from the clock):
- ``iterate(after)``: fires strictly after `after`, oldest first;
- ``prev(before, n, floor)``: the n-th fire strictly before `before` counting back (1 = the
  latest), or None when there are fewer than n at or after `floor` (the walk back never goes
  below it: a leap-day schedule's thousandth fire back lies 4,000 years ago);
- ``span(after, before, cap)``: (count, last) of the fires in (after, before): counted
  exactly for intervals and one-offs; for cron at most `cap` are walked, then `exact` is
  False and the count is a lower bound.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any



from poller.cron import CronSchedule, schedule_for

_TINY = timedelta(microseconds=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)  # the year field's first year


class AtFires:
    def __init__(self, at: datetime) -> None:
        if at is None:
            raise ValueError("one-off job has no `at` time")
        self.at = at

    def iterate(self, after: datetime | None) -> Iterator[datetime]:
        if after is None or self.at > after:
            yield self.at

    def prev(self, before: datetime, n: int, floor: datetime | None = None) -> datetime | None:
        return self.at if n == 1 and self.at < before and (floor is None or self.at >= floor) else None

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

    def prev(self, before: datetime, n: int, floor: datetime | None = None) -> datetime | None:
        k = self._last_index_before(before) - (n - 1)
        if k < 0 or (floor is not None and k < self._first_index_after(floor - _TINY)):
            return None
        return self.anchor + k * self.every

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

    def prev(self, before: datetime, n: int, floor: datetime | None = None) -> datetime | None:
        """The n-th fire strictly before `before`, counting back (1 = the latest); None when
        fewer than n lie in [floor, before) (no floor: since the dialect's first year).

        The forward walk is the definition of a fire (it settles DST folds and gaps), so the
        answer is read from it: the fires in a stretch before `before`, walked forward, the
        n-th from the end. The stretch starts as long as n fires take at the expression's
        density (fires per matching day) and doubles while it holds fewer than n. Cost: about
        n fires walked, and one croniter step per matching day."""
        low = _EPOCH if floor is None else max(floor, _EPOCH)
        if before <= low:
            return None
        near = self.sched.stretch(low, before)  # a short range: read from the shared walk
        if near is not None:
            return near[-n] if len(near) >= n else None
        reach = timedelta(days=1.25 * n / self.sched.per_day)
        while True:
            start = before - reach if before - low > reach else None
            if start is None:
                found = self._last(low - _TINY, before, n)
                return found[0] if len(found) == n else None
            # (a stretch that does not depend on the floor: the jobs of a pass share it)
            found = self.sched.memoised(("prev", start, before, n), lambda: self._last(start, before, n))
            if len(found) == n:
                return found[0]
            reach *= 2

    def _last(self, after: datetime, before: datetime, n: int) -> tuple[datetime, ...]:
        """The last n (or fewer) fires in (after, before), oldest first."""
        found: deque[datetime] = deque(maxlen=n)
        for fire in self.iterate(after):
            if fire >= before:
                break
            found.append(fire)
        return tuple(found)

    def span(self, after: datetime | None, before: datetime, cap: int) -> tuple[int, datetime | None, bool]:
        """(count, last) of the fires in (after, before): the two ends and the days with a DST
        change are walked, the other matching local days counted a day at a time (their times
        of day, poller.cron.matching_days), so a year of an hourly schedule costs 365 croniter
        steps and a few walked days. A walk stops after `cap` fires: then `exact` is False and
        the count is a lower bound."""
        assert after is not None, "cron jobs always have a frontier"
        if before <= after:
            return 0, None, True
        near = self.sched.stretch(after + _TINY, before)  # a short range: read from the shared walk
        if near is not None and len(near) < cap:
            return len(near), (near[-1] if near else None), True
        zone, day = self.sched._zone, timedelta(days=1)
        first = after.astimezone(zone).replace(tzinfo=None, hour=0, minute=0, second=0, microsecond=0) + day
        last = before.astimezone(zone).replace(tzinfo=None, hour=0, minute=0, second=0, microsecond=0) - day
        if first > last:  # less than two days: walk them
            count, last_fire, exact = self._walk(after, before, cap)
            if last_fire is None and count:  # the walk stopped at `cap`: read the last one back
                last_fire = self.prev(before, 1, after)
            return count, last_fire, exact
        # Days with a DST change are walked, each with the day after it (a fire moved past a
        # gap at midnight lands there); the other matching days count their times of day.
        count, walked, tail = 0, [], None
        for d, stable in self.sched.matching_days(first, last):
            inside = tail is not None and d < tail  # already in a walked stretch
            if stable and not inside:
                count += self.sched.per_day
            elif not stable and inside:
                walked[-1][1] = tail = d + 2 * day
            elif not stable:
                walked.append([d, d + 2 * day])
                tail = d + 2 * day
        start, end = _instant(first, zone), _instant(max(last + day, tail or first), zone)
        segments = [(after, start), *((_instant(lo, zone) - _TINY, min(_instant(hi, zone), before)) for lo, hi in walked),
                    (end - _TINY, before)]
        exact, last_fire = True, None
        for lo, hi in segments:
            n, seg_last, complete = self._walk(lo, hi, cap)
            count, exact = count + n, exact and complete
            last_fire = seg_last if hi is before and complete else last_fire
        if (last_fire is None or not exact) and count:
            last_fire = self.prev(before, 1, after)
        return count, last_fire, exact

    def _walk(self, after: datetime, before: datetime, cap: int) -> tuple[int, datetime | None, bool]:
        """(count, last, complete) of the fires in (after, before), walked one by one; the walk
        stops after `cap` fires (complete False, last then unknown: None)."""
        count, last = 0, None
        for fire in self.iterate(after):
            if fire >= before:
                return count, last, True
            count, last = count + 1, fire
            if count >= cap:
                return count, None, False
        return count, last, True


def _instant(wall: datetime, zone: Any) -> datetime:
    """A local midnight as an instant (UTC); the first occurrence if it is repeated."""
    return wall.replace(tzinfo=zone, fold=0).astimezone(timezone.utc)


def source(job: Any) -> AtFires | EveryFires | CronFires:
    """The fires of a claimed row read by attribute (kind, at, anchor, every, cron_normalized,
    timezone): a saturation pass's store.Job or a backfill request."""
    kind = job.kind
    if kind == "at":
        return AtFires(job.at)
    if kind == "every":
        return EveryFires(job.anchor, job.every)
    if kind == "cron":
        if not job.cron_normalized or not job.timezone:
            raise ValueError("cron job has no expression or no time zone")
        return CronFires(job.cron_normalized, job.timezone)
    raise ValueError(f"kind {kind!r} has no schedule to materialise")
