"""Fire times around every 2026 DST change in zones of every shape, against a brute-force
oracle that knows nothing of croniter's DST handling: it walks real instants minute by minute.

The rule (Debian cron's): a job is fixed-time when neither its minute nor its hour field starts
with `*`. A fixed-time job fires once per matching local wall-clock time: at the first
occurrence of a repeated time, and at the first instant after a spring-forward gap for a time
that does not exist. Any other job fires at every real instant whose local time matches.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from functools import cache
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter

from poller.cron import CronSchedule, normalize

UTC = timezone.utc
ZONES = [
    "America/New_York",     # 1 h, spring and fall
    "Europe/Berlin",
    "Europe/Dublin",        # "negative DST" in the tz database: winter is the offset change
    "Australia/Lord_Howe",  # a 30-minute shift
    "Australia/Adelaide",   # a half-hour base offset
    "Pacific/Chatham",      # a 45-minute base offset
    "America/Santiago",     # southern hemisphere, changes at midnight
    "Antarctica/Troll",     # a 2-hour shift
]
EXPRESSIONS = [
    "45 1-3 * * *", "0 2,14 * * *", "30 2 * * *", "0 1 * * *", "0/20 0-4 * * *", "0 0 * * *",
    "*/15 * * * *", "5 * * * *", "*/20 1-3 * * *", "* 2 * * *", "0 */2 * * *", "15,45 * * * *",
]


@cache
def transitions(tz: str) -> tuple[datetime, ...]:
    """UTC instants (to the minute) in 2026 where the zone's offset changes."""
    zone, out = ZoneInfo(tz), []
    t = datetime(2026, 1, 1, tzinfo=UTC)
    prev = t.astimezone(zone).utcoffset()
    while t.year == 2026:
        nxt = t + timedelta(hours=1)
        off = nxt.astimezone(zone).utcoffset()
        if off != prev:
            m = t
            while m.astimezone(zone).utcoffset() == prev:
                m += timedelta(minutes=1)
            out.append(m)
        t, prev = nxt, off
    return tuple(out)


def oracle(expr: str, tz: str, start: datetime, end: datetime) -> list[datetime]:
    zone = ZoneInfo(tz)
    norm = normalize(expr).split(" ")
    fixed = not (norm[1].startswith("*") or norm[2].startswith("*"))
    lo = start.astimezone(zone).replace(tzinfo=None) - timedelta(days=1)
    it = croniter(" ".join(norm), lo, ret_type=datetime, second_at_beginning=True)
    walls = set()
    w = it.get_next(datetime)
    while w <= end.astimezone(zone).replace(tzinfo=None) + timedelta(days=1):
        walls.add(w)
        w = it.get_next(datetime)
    real: list[datetime] = []
    t = start - timedelta(hours=6)
    while t <= end:
        if t.astimezone(zone).replace(tzinfo=None) in walls:
            real.append(t)
        t += timedelta(minutes=1)
    if not fixed:
        return [f for f in real if start < f <= end]
    out: list[datetime] = []
    seen_walls: set[datetime] = set()
    for f in real:  # first occurrence of each wall time
        wall = f.astimezone(zone).replace(tzinfo=None)
        if wall not in seen_walls:
            seen_walls.add(wall)
            out.append(f)
    t = start - timedelta(hours=6)
    while t <= end:  # wall times skipped by a gap fire at the first instant after it
        nxt = t + timedelta(minutes=1)
        a, b = t.astimezone(zone).replace(tzinfo=None), nxt.astimezone(zone).replace(tzinfo=None)
        if b - a > timedelta(minutes=1) and any(a < w < b for w in walls):
            out.append(nxt)
        t = nxt
    return sorted({f for f in out if start < f <= end})


CASES = [(tz, i, expr) for tz in ZONES for i in range(len(transitions(tz))) for expr in EXPRESSIONS]


@pytest.mark.parametrize(("tz", "index", "expr"), CASES)
def test_fires_around_each_2026_dst_change_match_the_oracle(tz: str, index: int, expr: str) -> None:
    change = transitions(tz)[index]
    start, end = change - timedelta(hours=5, minutes=3), change + timedelta(hours=5)
    schedule = CronSchedule(normalize(expr), tz)
    want = oracle(expr, tz, start, end)
    assert schedule.fires_between(start, end, 10_000) == want
    # Chained from each previous fire (how the poller calls it): the same sequence.
    chain, cursor = [], start
    while True:
        cursor = schedule.next_after(cursor)
        if cursor is None or cursor > end:
            break
        chain.append(cursor)
    assert chain == want


def test_every_zone_has_changes_in_2026() -> None:
    assert all(len(transitions(tz)) >= 2 for tz in ZONES)


@pytest.mark.parametrize(("tz", "index", "expr"), CASES[::3])
def test_counting_back_agrees_with_the_forward_walk_around_each_change(tz: str, index: int, expr: str) -> None:
    # Catch-up asks for "the n-th fire before `before`" (CronFires.prev): it must name a fire the
    # forward walk makes, never croniter's own idea of a repeated or skipped wall time.
    from poller.fires import CronFires

    change = transitions(tz)[index]
    src = CronFires(normalize(expr), tz)
    forward = oracle(expr, tz, change - timedelta(hours=30), change + timedelta(hours=8))
    for before in (change - timedelta(minutes=50), change + timedelta(minutes=10), change + timedelta(minutes=70),
                   change + timedelta(hours=4)):
        earlier = [f for f in forward if f < before]
        for n in (1, 2, 5):
            want = earlier[-n] if len(earlier) >= n else None
            if want is not None and want > change - timedelta(hours=29):
                assert src.prev(before, n) == want, (before, n)
