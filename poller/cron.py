"""Fire times for the poller: :class:`CronSchedule` reads an expression in the normal form of
poller.cron_dialect (its dialect, validation and `normalize`) in one IANA time zone.

Time zones and DST: fire times are wall-clock times in the schedule's IANA zone.
A wall-clock time that does not exist (spring forward) fires at the first instant
after the gap. As in Debian's cron, a job is *fixed-time* when neither its minute
nor its hour field starts with ``*`` (``30 2 * * *``, ``45 1-3 * * *``,
``0 2,14 * * *``): it fires once per local wall-clock time, so the repeated hour of
a fall-back day runs once. Any other job (``*/15 * * * *``, ``5 * * * *``,
``* 1 * * *``) follows elapsed time and fires for each real instant that matches.
The seconds and the other fields play no part in the rule.
"""

from __future__ import annotations

import heapq
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Any, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from poller.cron_days import as_local, days_for, gap_end, times_from
from poller.cron_dialect import CronError, normalize

__all__ = ["CronError", "CronSchedule", "normalize", "schedule_for"]

T = TypeVar("T")

_MIN, _HOUR = 1, 2  # the minute and hour fields of the normal form


class CronSchedule:
    """Fire times of one normalized expression in one IANA time zone; no clock, no DB."""

    __slots__ = ("expr", "tz", "fixed_time", "_zone", "_proto", "_days", "_times", "_memo", "_run", "_lock")

    def __init__(self, normalized_expr: str, tz: str) -> None:
        self.expr = normalize(normalized_expr)  # idempotent; rejects anything unchecked
        try:
            self._zone = ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise CronError(f'cron: unknown time zone "{tz}"') from exc
        self.tz = tz
        fields = self.expr.split(" ")
        # Debian cron's rule: fixed-time unless the minute or the hour field starts with `*`.
        self.fixed_time = not (fields[_MIN].startswith("*") or fields[_HOUR].startswith("*"))
        # Parsed once, for its expanded fields (the days come from poller.cron_days).
        self._proto = croniter(
            self.expr,
            datetime(1970, 1, 1),  # naive: croniter walks wall-clock times, _fires maps them
            ret_type=datetime,
            second_at_beginning=True,
            max_years_between_matches=130,
        )
        # A wall time matches when its day matches the day fields (day-of-month, month,
        # day-of-week, year) and its time of day the others: croniter finds the matching days
        # (the same day fields at 00:00:00), the times of a day come from croniter's own
        # expansion of the second, minute and hour fields. One croniter step per day instead
        # of one per fire (an hourly job's year of catch-up is 365 steps, not 8,760), and each
        # year's days are asked once per set of day fields (Days), whatever the zone and times.
        self._days = days_for(" ".join(fields[3:]))
        minute, hour, _, _, _, second, _ = self._proto.expanded
        self._times = tuple(
            tuple(range(n)) if "*" in values else tuple(sorted({int(v) for v in values}))
            for values, n in ((hour, 24), (minute, 60), (second, 60))
        )

        # window(): one stretch of the fire sequence, walked once and shared by every question
        # that starts inside it (jobs created at different moments have different frontiers,
        # and each pass asks again a little later); questions from before it (a catch-up) walk
        # on their own, memoised per (after, until, limit).
        self._run: _Run | None = None
        self._lock = threading.Lock()  # saturation computes in worker threads
        self._memo: dict[tuple[Any, ...], Any] = {}  # window() and prev() answers by question

    def __repr__(self) -> str:
        return f"CronSchedule({self.expr!r}, {self.tz!r})"

    def _fires(self, after: datetime) -> Iterator[datetime]:
        """Yield fires strictly after `after` as aware datetimes in the schedule's zone, in order.

        croniter walks naive wall-clock times (no DST arithmetic of its own); `_instants` maps
        them to real instants. When `after` is the first occurrence of a repeated wall time
        (inside a fall-back fold), the earlier wall times of that fold still have their second
        occurrence ahead: `_repeats` yields those, merged in order."""
        if after.tzinfo is None or after.utcoffset() is None:
            raise ValueError("after must be an aware datetime")
        local = after.astimezone(self._zone)
        wall = local.replace(tzinfo=None, fold=0)
        last = after.astimezone(timezone.utc).replace(tzinfo=None)  # naive UTC, as instants
        streams = [self._instants(wall, last, local.utcoffset())]
        if local.fold == 0 and not self.fixed_time:
            off0, off1 = self._zone.utcoffset(wall), self._zone.utcoffset(wall.replace(fold=1))
            if off0 > off1:
                # The fold's wall times start at the transition (read on the new offset).
                now = wall - off0
                change = gap_end(self._zone, now, now + (off0 - off1), off1)
                streams.append(self._repeats(change + off1, wall))
        for fire in heapq.merge(*streams):
            if fire > last:
                last = fire
                yield as_local(fire, self._zone)

    def _walls(self, start: datetime) -> Iterator[tuple[datetime, timedelta, timedelta]]:
        """(wall, offset of its first occurrence, offset of its second) for the matching wall
        times from `start` on (inclusive, to the second); the offsets differ only around a DST
        change."""
        start = start.replace(microsecond=0)
        day0 = start.replace(hour=0, minute=0, second=0)
        hours, minutes, seconds = self._times
        utcoffset = self._zone.utcoffset
        first = (start.hour, start.minute, start.second)
        for day in self._days.since(day0):  # ends when no fire is left (the year field exhausted)
            for h, m, sec in times_from(hours, minutes, seconds, first if day == day0 else (0, 0, 0)):
                w = day.replace(hour=h, minute=m, second=sec)
                yield w, utcoffset(w), utcoffset(w.replace(fold=1))

    def _instants(self, start: datetime, after: datetime, after_offset: timedelta) -> Iterator[datetime]:
        """Real instants (naive UTC, ascending) of the wall times from `start` on: an ordinary
        wall time is one instant; a repeated one (fall back) is two, of which a fixed-time job
        takes the first and any other job both; one inside a spring-forward gap does not exist:
        a fixed-time job fires at the first instant after the gap, any other job skips it.
        Second occurrences arrive out of wall order, so they wait in a heap (at most one
        fold's worth) until no earlier instant can follow. Once `after` (naive UTC, at UTC
        offset `after_offset`) is past the change, a repeated wall time contributes only its
        second occurrence (the first ones all lie before the change)."""
        pending: list[datetime] = []
        last: datetime | None = None
        for w, off0, off1 in self._walls(start):
            if off0 == off1:                   # an ordinary wall time
                first = w - off0
            elif off0 > off1:                  # repeated (fall back)
                first = w - off0
                if first <= after and after_offset == off1:  # past the change: only the second
                    if self.fixed_time:
                        continue
                    first = w - off1
                elif not self.fixed_time:
                    heapq.heappush(pending, w - off1)
            elif self.fixed_time:              # inside a gap: the first instant after it
                first = gap_end(self._zone, w - off1, w - off0, off1)
            else:
                continue
            while pending and pending[0] < first:
                yield heapq.heappop(pending)
            if last is None or first > last:  # gap walls collapse onto one instant
                last = first
                yield first
        yield from sorted(pending)

    def _repeats(self, low: datetime, high: datetime) -> Iterator[datetime]:
        """Second occurrences (naive UTC, ascending) of the repeated wall times in [low, high)."""
        for w, off0, off1 in self._walls(low):
            if w >= high:
                return
            if off0 > off1:
                yield w - off1

    def matching_days(self, first: datetime, last: datetime) -> Iterator[tuple[datetime, bool]]:
        """The matching local days from `first` to `last` (naive midnights, inclusive), each
        with whether it keeps one UTC offset all day (then it holds each of its times of day
        exactly once: `per_day` fires, no walk needed). The days are read from poller.cron_days.Days."""
        utcoffset, one_day = self._zone.utcoffset, timedelta(days=1)
        for day in self._days.since(first):
            if day > last:
                return
            end = day + one_day
            yield day, len({utcoffset(day), utcoffset(day.replace(fold=1)),
                            utcoffset(end), utcoffset(end.replace(fold=1))}) == 1

    @property
    def per_day(self) -> int:
        """Times of day that match (a matching day without a DST change fires this often)."""
        hours, minutes, seconds = self._times
        return len(hours) * len(minutes) * len(seconds)

    def next_after(self, after: datetime) -> datetime | None:
        """First fire strictly after `after` (the previous scheduled time), in UTC; None if none."""
        for fire in self._fires(after):
            return fire.astimezone(timezone.utc)
        return None

    def fires_between(self, after: datetime, until: datetime, limit: int) -> list[datetime]:
        """Fires in (after, until], oldest first, at most `limit`, as UTC datetimes."""
        return list(self.window(after, until, limit)[0])

    def window(self, after: datetime, until: datetime, limit: int) -> tuple[tuple[datetime, ...], datetime | None]:
        """(fires in (after, until], oldest first, at most `limit`; the first fire after those,
        or None if there is none or `limit` fires were found), in UTC.

        The fires are one set of instants whatever the question (`_fires(a)` is the part of it
        after `a`), so the answer is read from a stretch of the sequence walked once and kept
        (`_Run`): every later question that starts inside it takes its fires by bisection and
        extends the walk only past its end. A question from before the stretch, close to it,
        extends it backwards; one from further back (a catch-up) is walked on its own and
        memoised per (after, until, limit) (the memo is cleared past MEMO_SIZE entries)."""
        if until.tzinfo is None or until.utcoffset() is None:
            raise ValueError("until must be an aware datetime")
        if after.tzinfo is None or after.utcoffset() is None:
            raise ValueError("after must be an aware datetime")
        if limit <= 0:
            return (), None
        end = until.astimezone(timezone.utc)
        with self._lock:
            if end <= after or (after, end, limit) in self._memo:  # (a start beyond the horizon: one fire)
                return self._walk_alone(after, end, limit)
            run = self._run
            if run is None or (after > run.known and not run.extend_to(after)):
                run = self._run = _Run(after, self._utc_fires(after))  # the questions moved on
            elif after < run.after and not run.extend_back(after, self._utc_fires(after)):
                return self._walk_alone(after, end, limit)
            return run.answer(after, end, limit)

    def stretch(self, low: datetime, high: datetime) -> list[datetime] | None:
        """The fires in [low, high), UTC, read from the walked stretch (see window()), or None
        when it does not reach them within BACK_MAX fires walked, or they span more than
        STRETCH_REACH (a catch-up's long look back walks on its own)."""
        if high - low > STRETCH_REACH:
            return None
        start = low - _MICROSECOND
        with self._lock:
            run = self._run
            if run is None:
                run = self._run = _Run(start, self._utc_fires(start))
            elif start < run.after and not run.extend_back(start, self._utc_fires(start)):
                return None
            if high > run.known and not run.extend_to(high):
                return None
            fires = run.fires
            return fires[bisect_left(fires, low):bisect_left(fires, high)]

    def memoised(self, key: tuple[Any, ...], compute: Callable[[], T]) -> T:
        """compute() once per key among the questions kept in the memo (see window())."""
        with self._lock:
            hit = self._memo.get(key)
        if hit is None:
            hit = compute()
            with self._lock:
                if len(self._memo) >= MEMO_SIZE:
                    self._memo.clear()
                self._memo[key] = hit
        return hit

    def _utc_fires(self, after: datetime) -> Iterator[datetime]:
        return (fire.astimezone(timezone.utc) for fire in self._fires(after))

    def _walk_alone(self, after: datetime, end: datetime, limit: int) -> tuple[tuple[datetime, ...], datetime | None]:
        key = (after, end, limit)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        fires: list[datetime] = []
        following: datetime | None = None
        for utc in self._utc_fires(after):
            if utc > end:
                following = utc
                break
            fires.append(utc)
            if len(fires) >= limit:
                break
        result = (tuple(fires), following)
        if len(self._memo) >= MEMO_SIZE:
            self._memo.clear()
        self._memo[key] = result
        return result


class _Run:
    """A stretch of one schedule's fire sequence: `fires` (UTC, ascending) are all the fires in
    (after, known], `rest` the walk that continues after them, `done` when it has ended (no
    fire is left, ever). Only the fires a question may still need are kept (KEEP_BEHIND behind
    the latest question)."""

    __slots__ = ("after", "fires", "rest", "done")

    def __init__(self, after: datetime, rest: Iterator[datetime]) -> None:
        self.after, self.fires, self.rest, self.done = after, [], rest, False

    @property
    def known(self) -> datetime:
        return self.fires[-1] if self.fires else self.after

    def _pull(self) -> bool:
        try:
            self.fires.append(next(self.rest))
            return True
        except StopIteration:
            self.done = True
            return False

    def extend_to(self, after: datetime) -> bool:
        """Walk on until the stretch reaches `after`, at most BACK_MAX fires; False if it does not."""
        for _ in range(BACK_MAX):
            if self.known >= after or self.done or not self._pull():
                return True
        return self.known >= after

    def extend_back(self, after: datetime, walk: Iterator[datetime]) -> bool:
        """Start the stretch at `after` (earlier) if at most BACK_MAX fires lie between; False
        (unchanged) otherwise."""
        head: list[datetime] = []
        for fire in walk:
            if fire > self.after:
                break
            head.append(fire)
            if len(head) > BACK_MAX:
                return False
        self.after, self.fires = after, head + self.fires
        return True

    def answer(self, after: datetime, end: datetime, limit: int) -> tuple[tuple[datetime, ...], datetime | None]:
        fires = self.fires
        i = bisect_right(fires, after)
        while True:
            j = bisect_right(fires, end, i)
            if j - i >= limit:
                result: tuple[tuple[datetime, ...], datetime | None] = (tuple(fires[i:i + limit]), None)
                break
            if j < len(fires):
                result = (tuple(fires[i:j]), fires[j])
                break
            if self.done or not self._pull():
                result = (tuple(fires[i:j]), None)
                break
        if i > 2 * KEEP_BEHIND:  # the questions have moved on: forget what lies far behind them
            cut = i - KEEP_BEHIND
            self.after = fires[cut - 1]
            del fires[:cut]
        return result


MEMO_SIZE = 1024
BACK_MAX = 512     # fires walked to extend a stretch (back or on) before starting elsewhere
KEEP_BEHIND = 256  # fires kept behind the latest question
STRETCH_REACH = timedelta(minutes=15)  # the longest range stretch() reads
_MICROSECOND = timedelta(microseconds=1)


@lru_cache(maxsize=4096)
def schedule_for(normalized_expr: str, tz: str) -> CronSchedule:
    """A cached CronSchedule per (expression, time zone)."""
    return CronSchedule(normalized_expr, tz)
