"""Counting a gap (poller.fires.CronFires.span: days counted by their times of day, DST days
walked) agrees with walking every fire, for generated expressions, DST zones and stretches of
a few days to two months around each 2026 change."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from poller.cron import normalize
from poller.fires import CronFires
from tests.test_cron_dst import ZONES, transitions
from tests.test_preview_engine import expressions

ZONES_WITH_CHANGES = [z for z in ZONES if transitions(z)] + ["America/Santiago"]


@st.composite
def stretches(draw):
    tz = draw(st.sampled_from(ZONES_WITH_CHANGES))
    change = draw(st.sampled_from(transitions(tz)))
    after = change - timedelta(seconds=draw(st.integers(0, 20 * 86400)))
    before = after + timedelta(seconds=draw(st.integers(1, 60 * 86400)))
    return tz, after, before


@settings(max_examples=60, deadline=None)
@given(expr=expressions(), where=stretches())
def test_a_gap_counted_by_days_equals_the_fires_walked(expr: str, where) -> None:
    tz, after, before = where
    src = CronFires(normalize(expr), tz)
    walked, last = 0, None
    for fire in src.iterate(after):
        if fire >= before or walked > 20000:
            break
        walked, last = walked + 1, fire
    count, got_last, exact = src.span(after, before, 10**9)
    if walked <= 20000:
        assert (count, got_last, exact) == (walked, last, True)


def test_a_short_gap_past_the_cap_still_names_its_last_fire() -> None:
    """Under two days, the gap is walked; when the walk stops at the cap the count is a lower
    bound (exact False) but the last fire is read back: the poller resumes after it (a None
    here quarantined every-second schedules catching up a few hours)."""
    from datetime import datetime, timezone
    src = CronFires(normalize("* * * * * *"), "America/New_York")
    after = datetime(2026, 11, 27, 1, 12, 50, tzinfo=timezone.utc)
    before = datetime(2026, 11, 27, 3, 59, 30, tzinfo=timezone.utc)
    assert src.span(after, before, 1000) == (1000, datetime(2026, 11, 27, 3, 59, 29, tzinfo=timezone.utc), False)
