"""cronbox.cron_fires (the SQL fire engine behind preview and next_fires) against the poller's
Python (poller/cron.py): the same fires, instant for instant, for generated expressions, zones
of every DST shape and start instants around each change; plus the brute-force oracle cases of
tests/test_cron_dst.py run through SQL."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import psycopg
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from poller.cron import CronSchedule, normalize
from tests.test_cron_dst import CASES, ZONES, oracle, transitions

UTC = timezone.utc
AGREE_ZONES = [*ZONES, "UTC", "Asia/Kolkata", "America/Sao_Paulo", "Asia/Tehran"]


def sql_fires(conn: psycopg.Connection, expr: str, tz: str, after: datetime, n: int, until: datetime) -> list[datetime]:
    row = conn.execute("SELECT cronbox.cron_fires(%s, %s, %s, %s, %s)", (expr, tz, after, n, until)).fetchone()
    assert row is not None
    return [t.astimezone(UTC) for t in row[0]]


def py_fires(expr: str, tz: str, after: datetime, n: int, until: datetime) -> list[datetime]:
    return CronSchedule(normalize(expr), tz).fires_between(after, until, n)


@pytest.mark.parametrize(("tz", "index", "expr"), CASES)
def test_sql_engine_matches_the_dst_oracle_around_each_2026_change(conn, tz: str, index: int, expr: str) -> None:
    change = transitions(tz)[index]
    start, end = change - timedelta(hours=5, minutes=3), change + timedelta(hours=5)
    assert sql_fires(conn, expr, tz, start, 1000, end) == oracle(expr, tz, start, end)


def _item(low: int, high: int) -> st.SearchStrategy[str]:
    v = st.integers(low, high)
    return st.one_of(
        v.map(str),
        st.tuples(v, v).map(lambda t: f"{min(t)}-{max(t)}"),
        st.tuples(v, v, st.integers(1, 4)).map(lambda t: f"{min(t[:2])}-{max(t[:2])}/{t[2]}"),
        st.tuples(v, st.integers(1, high - low + 1)).map(lambda t: f"{t[0]}/{t[1]}"),
        st.integers(1, high - low + 1).map(lambda s: f"*/{s}"),
    )


def _field(low: int, high: int, star: float = 0.5) -> st.SearchStrategy[str]:
    items = st.lists(_item(low, high), min_size=1, max_size=3).map(",".join)
    return st.one_of(st.just("*"), items) if star else items


_DOW = st.one_of(
    st.just("*"), _field(0, 7, star=0),
    st.lists(st.tuples(st.integers(0, 7), st.integers(1, 5)).map(lambda t: f"{t[0]}#{t[1]}"), min_size=1, max_size=2).map(",".join),
    st.integers(0, 7).map(lambda d: f"{d}L"),
)
_DOM = st.one_of(st.just("*"), _field(1, 31, star=0), st.just("L"), _field(1, 31, star=0).map(lambda f: f + ",L"))


@st.composite
def expressions(draw) -> str:
    sec = draw(st.one_of(st.just("0"), st.just("0"), _field(0, 59)))
    minute = draw(st.one_of(st.just("*"), _field(0, 59), st.sampled_from(["0", "30", "15,45", "*/15", "0/20"])))
    hour = draw(st.one_of(st.just("*"), _field(0, 23), st.sampled_from(["0-4", "1-3", "2", "0", "*/2"])))
    dow = draw(_DOW)
    dom = "*" if "#" in dow or "L" in dow else draw(_DOM)
    mon = draw(st.one_of(st.just("*"), st.just("*"), _field(1, 12, star=0)))
    year = draw(st.one_of(st.just("*"), st.just("*"), st.just("*"), st.sampled_from(["2026", "2026-2028", "2027/2", "*/3"])))
    return " ".join([sec, minute, hour, dom, mon, dow, year])


@st.composite
def starts(draw) -> tuple[str, datetime]:
    tz = draw(st.sampled_from(AGREE_ZONES))
    near = transitions(tz) or (datetime(2026, 3, 1, tzinfo=UTC),)
    base = draw(st.sampled_from(near))
    delta = draw(st.integers(-3 * 86400, 86400))
    micro = draw(st.sampled_from([0, 0, 1, 999_999]))
    return tz, base + timedelta(seconds=delta, microseconds=micro)


@pytest.mark.slow
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(expr=expressions(), start=starts(), n=st.sampled_from([1, 3, 20, 60]))
def test_sql_engine_agrees_with_the_poller_on_generated_expressions(conn, expr: str, start, n: int) -> None:
    tz, after = start
    until = after + timedelta(days=3 * 366)
    want = py_fires(expr, tz, after, n, until)
    assert sql_fires(conn, expr, tz, after, n, until) == want, (expr, tz, after)


@pytest.mark.parametrize("expr", ["0 * * 1-30,L * */4 *", "0 * * 1-31,L * */4 *", "0 * * 2-31,L * */4 *",
                                  "0 * * */2 * 0-6 *", "0 0 0 1-31 * 1 *", "0 0 0 */1 * 1 *", "0 0 0 1-31 * */2 *",
                                  "0 0 0 L * 0-6 *", "0 0 0 */3 * 0-7 *", "*/5 * * * * *", "* * * * *", "0 0 29 2 *", "0 30 2 * * *", "0 0 0 L * * *",
                                  "0 0 0 * * 5#5 *", "0 0 12 * * 1L *", "0 */20 1-3 * * * *", "0 0 0 1 1 * 2030"])
@pytest.mark.parametrize("tz", ["Europe/Berlin", "Australia/Lord_Howe", "America/Santiago"])
def test_sql_engine_agrees_on_chosen_expressions_over_years(conn, expr: str, tz: str) -> None:
    after = datetime(2026, 1, 1, 0, 0, 0, 500_000, tzinfo=UTC)
    until = after + timedelta(days=10 * 366)
    assert sql_fires(conn, expr, tz, after, 1000, until) == py_fires(expr, tz, after, 1000, until)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(expr=expressions(), minutes=st.lists(st.integers(0, 3 * 366 * 1440), min_size=1, max_size=40))
# found by a clean-clone CI run: `1-30,L` is all 31 days for croniter beside a `*/3` day of week
@example(expr="0 * * 1-30,L * */3 *", minutes=[0])
def test_calendar_cron_matching_agrees_with_croniter_to_the_minute(conn, expr: str, minutes: list[int]) -> None:
    # exclusion calendars match a fire's local time against their cron expressions to the
    # minute (seconds ignored): the same days and times croniter walks
    from croniter import croniter

    fields = normalize(expr).split(" ")
    fields[0] = "0"
    minute_expr = " ".join(fields)
    with conn.transaction(force_rollback=True):
        cal = conn.execute("SELECT cronbox.create_calendar_at('c', crons => ARRAY[%s], p_now => now())", (expr,)).fetchone()[0]
        walls = [datetime(2026, 1, 1) + timedelta(minutes=m, seconds=s % 60) for m, s in zip(minutes, range(7, 1000, 13))]
        got = conn.execute("SELECT cronbox.excluded_by(ARRAY[%s]::bigint[], %s::timestamptz[])",
                           (cal, [w.replace(tzinfo=UTC) for w in walls])).fetchone()[0]
    for wall, name in zip(walls, got):
        top = wall.replace(second=0)
        it = croniter(minute_expr, top - timedelta(seconds=1), ret_type=datetime, second_at_beginning=True,
                      max_years_between_matches=130)
        try:
            hit = it.get_next(datetime) == top
        except Exception:
            hit = False
        assert (name == "c") == hit, (expr, wall)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(anchor=st.integers(0, 10**9), every=st.integers(1, 366 * 86400), offset=st.integers(-10**8, 10**9),
       micro=st.integers(0, 999_999), n=st.sampled_from([1, 5, 50]))
def test_sql_fixed_rate_fires_agree_with_the_poller(conn, anchor: int, every: int, offset: int, micro: int, n: int) -> None:
    from itertools import islice

    from poller.fires import EveryFires

    start = datetime(2000, 1, 1, tzinfo=UTC) + timedelta(seconds=anchor)
    step = timedelta(seconds=every)
    after = start + timedelta(seconds=offset, microseconds=micro)
    until = after + timedelta(days=200 * 366)
    want = [t for t in islice(EveryFires(start, step).iterate(after), n) if t <= until]
    got = [r[0] for r in conn.execute(
        "SELECT t FROM cronbox.plan_fires('every', NULL, 'UTC', %s, %s, NULL, NULL, NULL, %s, '{}', %s, %s) AS t",
        (step, start, after, n, until))]
    assert got == want


@pytest.mark.parametrize("expr", ["* * L * *,*", "0 0 *,L * 1", "0 0 1,* * MON", "0 12 L * *,*/1"])
def test_a_day_field_with_a_star_item_is_unrestricted_in_both_engines(conn, expr: str) -> None:
    after = datetime(2026, 11, 27, 4, 0, tzinfo=UTC)
    until = after + timedelta(days=70)
    assert sql_fires(conn, normalize(expr), "America/New_York", after, 5, until) == \
        py_fires(expr, "America/New_York", after, 5, until)
