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

from croniter import CroniterBadDateError, croniter

from poller.cron import CronSchedule, schedule_for

_TINY = timedelta(microseconds=1)
_DST_MARGIN = timedelta(hours=3)  # longer than any DST shift (2 h at most)


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
        fewer than n lie in [floor, before).

        croniter's backward walk only proposes a candidate: near a DST change it can land on
        a wall time the forward walk never fires (a fixed-time job's second occurrence of a
        repeated hour, a time inside a gap) or miss a real one. The forward walk is the
        definition of a fire, so the answer is settled with it: the fires from a little before
        the candidate up to `before`, the n-th from the end. Cost: about n fires, plus a DST
        fold's worth (up to 3 h) only when a change lies near the candidate."""
        it = croniter(self.sched.expr, before.astimezone(self.sched._zone), ret_type=datetime,
                      second_at_beginning=True, max_years_between_matches=130)
        low = None if floor is None else (floor - _DST_MARGIN).astimezone(self.sched._zone).replace(tzinfo=None)
        candidate = None
        try:
            for _ in range(n):
                candidate = it.get_prev(datetime)
                if low is not None and candidate.replace(tzinfo=None) < low:
                    return None  # fewer than n since the floor: no need to walk further back
        except (CroniterBadDateError, ValueError, OverflowError):  # no fire left (year 1 passed)
            candidate = None
        if candidate is None:
            return None
        zone = self.sched._zone
        found: deque[datetime] = deque(maxlen=n)
        for _ in range(4):  # too few: the candidate was a wall time that never fires; go further back
            start = candidate - _TINY
            if (start - _DST_MARGIN).astimezone(zone).utcoffset() != (candidate + _DST_MARGIN).astimezone(zone).utcoffset():
                start -= _DST_MARGIN
            found.clear()
            for fire in self.iterate(start.astimezone(timezone.utc)):
                if fire >= before:
                    break
                found.append(fire)
            if len(found) == n:
                return found[0] if floor is None or found[0] >= floor else None
            try:
                for _ in range(n - len(found)):
                    candidate = it.get_prev(datetime)
            except (CroniterBadDateError, ValueError, OverflowError):
                break
            if low is not None and candidate.replace(tzinfo=None) < low:
                break
        if floor is not None and (len(found) < n or found[0] < floor):
            return None
        return found[0] if found else None

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
