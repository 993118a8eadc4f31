"""No valid schedule is ever quarantined: generated definitions (every shape of expression the
validator accepts, leap days, seconds and year fields; intervals), 12+ time zones, a start
anywhere from now - catchup_window to 10 years ahead, every catch-up mode and window. One real
saturation pass each (poller/saturate.py), then: the job is not paused, and what it stored
agrees with the SQL engine: the futures after now are preview's, the futures and the missed gap
are the definition's fires from its start with no hole, and next_fire is the fire after them."""

from __future__ import annotations

import pytest
import asyncio
from datetime import datetime, timedelta, timezone

import psycopg
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from poller.cron import CronError, normalize
from poller.saturate import saturate_once
from tests.cron_cases import expressions
from tests.test_cron_dst import ZONES, transitions

UTC = timezone.utc
TZS = [*ZONES, "UTC", "Asia/Kolkata", "America/Sao_Paulo", "Asia/Tehran", "Pacific/Kiritimati"]
HORIZON = timedelta(minutes=2)
GRACE = timedelta(seconds=30)
WINDOWS = {"1 hour": timedelta(hours=1), "1 day": timedelta(days=1), "30 days": timedelta(days=30),
           "366 days": timedelta(days=366)}
TEN_YEARS = 3653 * 86400
_NOWS = [datetime(2026, 11, 27, 4, 0, tzinfo=UTC), datetime(2028, 3, 1, 0, 0, 30, tzinfo=UTC),
         datetime(2029, 12, 31, 23, 59, 50, tzinfo=UTC)]


@st.composite
def definitions(draw):
    tz = draw(st.sampled_from(TZS))
    now = draw(st.one_of(st.sampled_from(_NOWS),
                         st.sampled_from(transitions(tz) or _NOWS).map(lambda t: t + timedelta(minutes=1))))
    window = draw(st.sampled_from(sorted(WINDOWS)))
    # the start: inside the catch-up window, or up to 10 years ahead
    offset = draw(st.one_of(st.integers(-int(WINDOWS[window].total_seconds()), 0),
                            st.integers(0, 3 * 86400), st.integers(0, TEN_YEARS)))
    start = now + timedelta(seconds=offset, microseconds=draw(st.sampled_from([0, 0, 250000])))
    catchup = draw(st.sampled_from(["skip", "latest", "all"]))
    kind = draw(st.sampled_from(["cron"] * 5 + ["every"]))
    if kind == "every":
        spec = draw(st.sampled_from(["1 second", "7 seconds", "1 minute", "90 minutes", "1 day", "1 mon", "1 year"]))
    else:
        spec = draw(st.one_of(expressions(), st.sampled_from(
            ["0 0 29 2 *", "0 0 0 29 2 * 2028", "@yearly", "0 30 2 * * *", "0 0 L * *", "0 0 * * 5#5", "* * * * * *"])))
    return kind, spec, tz, now, start, catchup, window


async def _check(conn: psycopg.AsyncConnection, kind, spec, tz, now, start, catchup, window) -> None:
    async def one(query: str, *args):
        return (await (await conn.execute(query, args)).fetchone())[0]

    try:
        async with conn.transaction():
            job_id = await one(
                f"SELECT cronbox.schedule_at(name => 'g', {kind} => %s, timezone => %s, starts_at => %s, "
                "catchup => %s, catchup_window => %s, p_now => %s)", spec, tz, start, catchup, window, now)
    except psycopg.errors.InvalidParameterValue:
        return  # refused at the door (e.g. a year field with no fire left): not the poller's business
    while (await saturate_once(conn, batch=10, horizon=HORIZON, grace=GRACE, now=now))[0]:
        pass
    paused, reason, frontier, next_fire, finished = (await (await conn.execute(
        "SELECT j.paused, paused_reason, frontier, next_fire, finished_at IS NOT NULL FROM cronbox.job j JOIN cronbox.job_fire USING (job_id) "
        "WHERE job_id = %s", (job_id,))).fetchone())
    assert not paused, reason
    stored = [r[0] for r in await (await conn.execute(
        "SELECT fire_at FROM cronbox.job_future WHERE job_id = %s ORDER BY fire_at", (job_id,))).fetchall()]
    gap = await (await conn.execute(
        "SELECT fire_at, missed_last_at, missed_fires FROM cronbox.runs WHERE job_id = %s AND state = 'missed'",
        (job_id,))).fetchall()
    assert len(gap) <= 1
    definition = ("SELECT array_agg(t) FROM cronbox.job j CROSS JOIN LATERAL cronbox.plan_fires(j.kind, j.cron_normalized, "
                  "j.timezone, j.every, j.anchor, j.at, j.starts_at, j.ends_at, %s, NULL, %s, %s) t WHERE j.job_id = %s")
    if gap:
        (first, last, count), = gap
        assert await one(definition, start - timedelta(microseconds=1), 1, first, job_id) == [first]
    after = gap[0][1] if gap else start - timedelta(microseconds=1)
    # the futures continue the gap (or the start) with no hole, up to the horizon, then next_fire
    want = await one(definition, after, len(stored) + 1, now + timedelta(days=80 * 366), job_id) or []
    assert stored == want[:len(stored)]
    if len(want) > len(stored):
        # exact once saturated; a job not claimed yet (its start is beyond the horizon) shows
        # schedule()'s lower bound, past half the horizon
        assert not finished and (next_fire == want[len(stored)] or (
            not stored and not gap and now + HORIZON / 2 < next_fire <= want[0])), (next_fire, want[len(stored)])
    else:
        assert next_fire is None or (not stored and not gap and next_fire > now + HORIZON / 2)
    ahead = [t for t in stored if t > now]
    preview = await one(
        f"SELECT array_agg(fire_at) FROM cronbox.preview_at({kind} => %s, timezone => %s, starts_at => %s, "
        "n => %s, p_now => %s)", spec, tz, start, min(1000, len(ahead) + 1), now) or []
    assert ahead == [t for t in preview if t <= now + HORIZON][:len(ahead)] == [t for t in preview if t <= frontier]


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(case=definitions())
@example(case=("cron", "0 0 29 2 *", "UTC", datetime(2026, 11, 27, 4, tzinfo=UTC),
               datetime(2026, 3, 26, tzinfo=UTC), "all", "366 days"))
@example(case=("cron", "* * * * * *", "America/New_York", datetime(2026, 11, 27, 4, tzinfo=UTC),
               datetime(2026, 11, 27, 1, 12, 50, tzinfo=UTC), "skip", "1 day"))
def test_no_valid_schedule_is_quarantined_and_its_fires_are_previews(shared_dsn, case) -> None:
    kind, spec, *_rest = case
    if kind == "cron":
        try:
            normalize(spec)
        except CronError:
            return

    async def run() -> None:
        conn = await psycopg.AsyncConnection.connect(shared_dsn, prepare_threshold=None)
        try:
            await conn.execute("SELECT 1")
            await _check(conn, *case)
        finally:
            await conn.rollback()
            await conn.close()

    asyncio.run(run())
