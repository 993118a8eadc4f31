"""pause(until =>) and backfill(name, from, to) at the SQL level: bounds, errors,
row-level security, the automatic resume through resume_at, backfilled fires made by the
poller's pass (poller/backfill.py) with the saturation fire code, never a fire twice, queued
behind regular fires, shown as origin backfill. Time is driven with p_now (T0 lies in the past
of the real clock, so run ids, which encode the real creation time, follow their fires)."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest

from poller.backfill import PASS_FIRES, backfill_once

from .plan_support import nodes
from .runs_support import ADD_JOB_ROWS
from .schedhelp import aconn, changes, futures, one, rows, saturate, schedule, utc  # noqa: F401

T0 = utc(2024, 1, 1, 0, 0)
MIN = timedelta(minutes=1)
HOUR = timedelta(hours=1)
SEC = timedelta(seconds=1)


async def fails(conn: psycopg.AsyncConnection, state: str, match: str, query: str, *params) -> None:
    with pytest.raises(psycopg.Error, match=match) as err:
        async with conn.transaction():
            await conn.execute(query, params)
    assert err.value.sqlstate == state, err.value


# -- pause until -------------------------------------------------------------------------

async def test_pause_until_resumes_by_itself_from_its_time_logged_as_cronbox(aconn):
    await schedule(aconn, name="p", every="10 minutes", p_now=T0)
    await schedule(aconn, name="other", every="10 minutes", p_now=T0)
    await saturate(aconn, T0, horizon=HOUR)
    until = T0 + 30 * MIN
    assert await one(aconn, "SELECT cronbox.pause_at('p', 'deploy', until => %s, p_now => %s)", until, T0 + 5 * MIN)
    assert await futures(aconn, "p") == []
    assert await one(aconn, "SELECT paused_until FROM cronbox.schedules WHERE name = 'p'") == until
    assert await one(aconn, "SELECT cronbox.resume_paused_at(100, p_now => %s)", until - SEC) == 0  # not yet
    assert await one(aconn, "SELECT cronbox.resume_paused_at(100, p_now => %s)", until + 2 * SEC) == 1
    assert await one(aconn, "SELECT cronbox.resume_paused_at(100, p_now => %s)", until + 3 * SEC) == 0  # once
    assert await one(aconn, "SELECT paused, paused_until FROM cronbox.schedules WHERE name = 'p'") == (False, None)
    last = (await changes(aconn, "p"))[-1]
    assert last == ("resumed", f"resumed automatically: paused until {until.strftime('%Y-%m-%d %H:%M:%S')}+00", "cronbox")
    # continues from its until time: the fire at exactly that time runs, nothing before it
    await saturate(aconn, until + 2 * SEC, horizon=HOUR)
    got = await futures(aconn, "p")
    assert got[0] == until and T0 + 20 * MIN not in got
    assert await futures(aconn, "other") == [T0 + k * 10 * MIN for k in range(1, 7)]  # untouched


async def test_a_new_pause_replaces_until_and_a_manual_resume_clears_it(aconn):
    await schedule(aconn, name="p", every="1 hour", p_now=T0)
    a, b = T0 + HOUR, T0 + 2 * HOUR
    assert await one(aconn, "SELECT cronbox.pause_at('p', until => %s, p_now => %s)", a, T0)
    assert await one(aconn, "SELECT cronbox.pause_at('p', until => %s, p_now => %s)", a, T0) is False  # same
    assert await one(aconn, "SELECT cronbox.pause_at('p', 'longer', until => %s, p_now => %s)", b, T0)
    assert await one(aconn, "SELECT paused_until FROM cronbox.job WHERE name = 'p'") == b
    assert await one(aconn, "SELECT cronbox.resume_paused_at(100, p_now => %s)", a + SEC) == 0  # replaced
    assert await one(aconn, "SELECT cronbox.pause_at('p', 'indefinitely', p_now => %s)", T0)
    assert await one(aconn, "SELECT paused_until FROM cronbox.job WHERE name = 'p'") is None
    assert await one(aconn, "SELECT cronbox.resume_paused_at(100, p_now => %s)", b + SEC) == 0
    assert await one(aconn, "SELECT cronbox.pause_at('p', until => %s, p_now => %s)", a, T0)
    assert await one(aconn, "SELECT cronbox.resume_at('p', p_now => %s)", T0 + MIN)
    assert await one(aconn, "SELECT paused_until FROM cronbox.job WHERE name = 'p'") is None
    assert await one(aconn, "SELECT cronbox.resume_paused_at(100, p_now => %s)", a + SEC) == 0
    assert [c[:2] for c in await changes(aconn, "p")][1:] == [
        ("paused", f"paused by operator (until {a.strftime('%Y-%m-%d %H:%M:%S')}+00)"),
        ("paused", f"longer (until {b.strftime('%Y-%m-%d %H:%M:%S')}+00)"),
        ("paused", "indefinitely (until resumed)"),
        ("paused", f"paused by operator (until {a.strftime('%Y-%m-%d %H:%M:%S')}+00)"),
        ("resumed", "resumed by operator")]


@pytest.mark.parametrize("until", ["now() - interval '1 second'", "now()", "'infinity'",
                                   "now() + interval '367 days'"])
async def test_pause_until_must_be_finite_after_now_and_within_366_days(aconn, until):
    await schedule(aconn, name="p", every="1 hour")
    await fails(aconn, "22023", "^until: must be a finite time after now and at most 366 days ahead",
                f"SELECT cronbox.pause('p', until => {until})")
    assert await one(aconn, "SELECT paused, paused_until FROM cronbox.job WHERE name = 'p'") == (False, None)
    assert await one(aconn, "SELECT cronbox.pause('p', until => now() + interval '366 days')")


# -- backfill ----------------------------------------------------------------------------

async def _pass(conn, now) -> tuple[int, int, int]:
    return await backfill_once(conn, now=now)


async def _dispatch(conn, now) -> int:
    return await one(conn, "SELECT dispatched FROM cronbox.dispatch_at(100, p_now => %s)", now)


async def _complete_all(conn, now) -> None:
    await rows(conn, "SELECT cronbox.complete_run_at(run_id, NULL, %s) FROM cronbox.runs "
                     "WHERE state = 'dispatched'", now)


async def test_backfill_fires_the_skipped_times_once_one_after_another_behind_regular_fires(aconn):
    await schedule(aconn, name="b", every="10 minutes", overlap="allow", p_now=T0)
    await saturate(aconn, T0, horizon=HOUR)
    assert await _dispatch(aconn, T0 + 10 * MIN) == 1                      # the fire of T0+10m ran
    await _complete_all(aconn, T0 + 11 * MIN)
    await one(aconn, "SELECT cronbox.pause_at('b', p_now => %s)", T0 + 15 * MIN)  # 20, 30, 40 never fire
    await one(aconn, "SELECT cronbox.resume_at('b', p_now => %s)", T0 + 45 * MIN)
    await saturate(aconn, T0 + 45 * MIN, horizon=HOUR)
    now = T0 + 50 * MIN
    request = await one(aconn, "SELECT cronbox.backfill_at('b', %s, %s, p_now => %s)", T0, now, now)
    user = await one(aconn, "SELECT current_user")
    assert (await changes(aconn, "b"))[-1] == (
        "backfill", f"backfill {request}: fires from 2024-01-01 00:00:00+00 to 2024-01-01 00:50:00+00 "
                    f"(5 fires), overlap buffer_all, priority 0", user)
    assert await _pass(aconn, now) == (1, 3, 2)  # T0+10m ran, T0+50m is pending: not again
    assert await futures(aconn, "b", origin="backfill") == [T0 + 20 * MIN, T0 + 30 * MIN, T0 + 40 * MIN]
    assert await one(aconn, "SELECT state, fires, duplicates FROM cronbox.backfills WHERE backfill_id = %s",
                     request) == ("done", 3, 2)
    assert await _pass(aconn, now) == (0, 0, 0)
    ran = []
    for k in range(6):
        t = now + SEC + k * MIN
        await _dispatch(aconn, t)
        ran += await rows(aconn, "SELECT fire_at, origin FROM cronbox.runs WHERE job = 'b' AND state = 'dispatched' "
                                 "ORDER BY fire_at")
        await _complete_all(aconn, t + SEC)
    assert ran[0] == (T0 + 50 * MIN, "schedule")  # the regular fire first
    assert [r for r in ran if r[1] == "backfill"] == [(T0 + k * 10 * MIN, "backfill") for k in (2, 3, 4)]
    fired = await rows(aconn, "SELECT fire_at FROM cronbox.runs WHERE job = 'b' AND fire_at <= %s "
                              "AND state <> 'skipped' ORDER BY fire_at", now)
    assert len(fired) == len(set(fired))  # never a fire twice


async def test_backfill_skips_the_fires_the_jobs_calendars_exclude_and_counts_them(aconn):
    # the range's fires fall on 1 and 2 January 2024; a calendar excludes 1 January
    await one(aconn, "SELECT cronbox.create_calendar_at('new-year', dates => '{2024-01-01}', p_now => %s)", T0)
    await schedule(aconn, name="c", cron="0 12 * * *", exclude="new-year", overlap="allow", p_now=T0)
    await one(aconn, "SELECT cronbox.pause_at('c', p_now => %s)", T0 + MIN)        # both fires fall in the pause
    await one(aconn, "SELECT cronbox.resume_at('c', p_now => %s)", T0 + 2 * 24 * HOUR)
    await saturate(aconn, T0 + 2 * 24 * HOUR, horizon=HOUR)
    now = T0 + 2 * 24 * HOUR + MIN
    request = await one(aconn, "SELECT cronbox.backfill_at('c', %s, %s, p_now => %s)", T0, now, now)
    assert await _pass(aconn, now) == (1, 1, 0)  # 2 January's fire made; 1 January's neither made nor a duplicate
    assert await futures(aconn, "c", origin="backfill") == [utc(2024, 1, 2, 12, 0)]
    assert await one(aconn, "SELECT state, fires, duplicates, excluded, outcome FROM cronbox.backfills "
                            "WHERE backfill_id = %s", request) == (
        "done", 1, 0, 1, "done: 1 fire backfilled, 0 already ran or pending, 1 excluded by calendars")


@pytest.mark.parametrize("args, state, match", [
    ("NULL, now() - interval '1 hour', now()", "22004", "^name: must not be NULL"),
    ("'b', NULL, now()", "22004", "^from: must not be NULL"),
    ("'b', now() - interval '1 hour', NULL", "22004", "^to: must not be NULL"),
    ("'b', '-infinity', now()", "22023", "^from: must be a finite time"),
    ("'b', now() - interval '1 hour', 'infinity'", "22023", "^to: must be a finite time not after now"),
    ("'b', now() - interval '1 hour', now() + interval '1 second'", "22023", "^to: must be a finite time not after now"),
    ("'b', now() - interval '1 hour', now() - interval '2 hours'", "22023", "^from: must be before to"),
    ("'b', now() - interval '367 days', now()", "22023", "^from: the range from .. to must be at most 366 days"),
    ("'b', now() - interval '1 day', now()", "22023", "^from: the range holds 1441 fires of 'b', at most 1000"),
    ("'b', now() - interval '10 days', now() - interval '9 days'", "22023", "^from: no scheduled time of 'b'"),
    ("'b', now() - interval '1 hour', now(), overlap => 'sometimes'", "22023", "^overlap: must be one of"),
    ("'b', now() - interval '1 hour', now(), priority => 40000", "22023", "^priority: must be between"),
    ("'nope', now() - interval '1 hour', now()", "P0002", "^name: no schedule named 'nope'"),
    ("'dep', now() - interval '1 hour', now()", "55000", "^name: 'dep' has no fixed fire times to backfill"),
    ("'slow', now() - interval '1 hour', now()", "55000", "^name: 'slow' has no fixed fire times to backfill"),
])
async def test_backfill_checks_every_argument_before_writing(aconn, args, state, match):
    await aconn.execute("SELECT cronbox.schedule('b', every => '1 minute', starts_at => now() - interval '2 days')")
    await schedule(aconn, name="dep", after=["b"])
    await schedule(aconn, name="slow", every="1 minute", every_mode="fixed_delay")
    before = await one(aconn, "SELECT count(*) FROM cronbox.job_change")
    await fails(aconn, state, match, f"SELECT cronbox.backfill({args})")
    assert await one(aconn, "SELECT count(*) FROM cronbox.backfill") == 0
    assert await one(aconn, "SELECT count(*) FROM cronbox.job_change") == before


async def test_cron_backfill_stops_at_1000_fires_and_says_so(aconn):
    await schedule(aconn, name="c", cron="* * * * * *", p_now=T0)  # every second
    await saturate(aconn, T0 + HOUR, horizon=MIN)
    request = await one(aconn, "SELECT cronbox.backfill_at('c', %s, %s, overlap => 'allow', p_now => %s)",
                        T0, T0 + HOUR, T0 + HOUR)
    # a long backfill advances over several passes (each makes at most PASS_FIRES of a request)
    passes = 0
    while (await _pass(aconn, T0 + HOUR))[0]:
        passes += 1
    assert passes == 1000 // PASS_FIRES
    state, fires, dups, outcome = await one(
        aconn, "SELECT state, fires, duplicates, outcome FROM cronbox.backfills WHERE backfill_id = %s", request)
    assert (state, fires + dups) == ("done", 1000)
    assert outcome.endswith("stopped at the cap of 1000 fires: fires from 2024-01-01T00:16:40+00:00 on were not backfilled")
    got = await futures(aconn, "c", origin="backfill")
    assert got[0] == T0 and got[-1] == T0 + 999 * SEC and len(got) == fires  # from and to included


async def test_backfilled_fires_come_due_at_a_bounded_rate_across_requests(aconn):
    """100 backfills of a year requested at once must not put 100,000 fires due "now" ahead of
    every other job's next fire: backfilled fires come due 0.5 ms apart (2,000 per second in a
    bucket: the jobs here share one, plain PostgreSQL's or their group's on Citus), each pass
    after the last due time an earlier pass gave."""
    for name in ("pace/x", "pace/y", "pace/z"):
        await schedule(aconn, name=name, every="1 minute", p_now=T0)
    await saturate(aconn, T0 + HOUR, horizon=MIN)
    for name in ("pace/x", "pace/y"):
        await one(aconn, "SELECT cronbox.backfill_at(%s, %s, %s, overlap => 'allow', p_now => %s)",
                  name, T0, T0 + 30 * MIN, T0 + HOUR)
    await _pass(aconn, T0 + HOUR)
    first = await rows(aconn, "SELECT due_at FROM cronbox.job_future WHERE origin = 'backfill' ORDER BY due_at")
    assert len(first) == 60 and first[0] > T0 + HOUR
    assert min(b - a for a, b in zip(first, first[1:])) >= timedelta(microseconds=500)
    # a later pass, even at the same clock, queues after them
    await one(aconn, "SELECT cronbox.backfill_at('pace/z', %s, %s, overlap => 'allow', p_now => %s)",
              T0, T0 + 30 * MIN, T0 + HOUR)
    await _pass(aconn, T0 + HOUR)
    later = await rows(aconn, "SELECT f.due_at FROM cronbox.job_future f JOIN cronbox.job j USING (job_id) "
                              "WHERE f.origin = 'backfill' AND j.name = 'pace/z' ORDER BY f.due_at")
    assert len(later) == 30 and later[0] > first[-1]


async def test_backfill_waits_for_fires_the_poller_has_not_passed_yet(aconn):
    await schedule(aconn, name="w", every="10 minutes", p_now=T0)
    await saturate(aconn, T0, horizon=20 * MIN)
    await one(aconn, "SELECT cronbox.pause_at('w', p_now => %s)", T0 + MIN)  # frontier back before T0+10m
    now = T0 + HOUR
    request = await one(aconn, "SELECT cronbox.backfill_at('w', %s, %s, p_now => %s)", T0, now, now)
    assert await _pass(aconn, now) == (1, 0, 0)
    assert await one(aconn, "SELECT state FROM cronbox.backfills WHERE backfill_id = %s", request) == "pending"
    await one(aconn, "SELECT cronbox.resume_at('w', p_now => %s)", now)  # resume moves the frontier to now
    assert await _pass(aconn, now) == (1, 6, 0)
    assert await futures(aconn, "w", origin="backfill") == [T0 + k * 10 * MIN for k in range(1, 7)]
    assert await one(aconn, "SELECT state FROM cronbox.backfills WHERE backfill_id = %s", request) == "done"


async def test_two_backfills_of_the_same_range_fire_it_once(aconn):
    await schedule(aconn, name="d", every="10 minutes", p_now=T0)
    await saturate(aconn, T0, horizon=10 * MIN)
    await one(aconn, "SELECT cronbox.pause_at('d', p_now => %s)", T0 + MIN)
    await one(aconn, "SELECT cronbox.resume_at('d', p_now => %s)", T0 + HOUR)
    for _ in range(2):
        await one(aconn, "SELECT cronbox.backfill_at('d', %s, %s, p_now => %s)", T0, T0 + HOUR, T0 + HOUR)
    assert await _pass(aconn, T0 + HOUR) == (2, 6, 6)
    assert await futures(aconn, "d", origin="backfill") == [T0 + k * 10 * MIN for k in range(1, 7)]


async def test_owners_backfill_and_pause_only_their_own_jobs_and_readers_not_at_all(aconn):
    tag = await one(aconn, "SELECT pg_backend_pid()")
    alice, bob, reader = f"t_ops_alice_{tag}", f"t_ops_bob_{tag}", f"t_ops_reader_{tag}"
    for role, member in ((alice, "cronbox_user"), (bob, "cronbox_user"), (reader, "cronbox_reader")):
        await aconn.execute(f'CREATE ROLE "{role}" NOLOGIN IN ROLE {member}')  # rolled back with the test
    for role, name in ((alice, "mine"), (bob, "theirs")):
        await aconn.execute(f'SET ROLE "{role}"')
        await aconn.execute("SELECT cronbox.schedule(%s, every => '1 minute', starts_at => now() - interval '1 day')",
                            (name,))
        await aconn.execute("RESET ROLE")
    await aconn.execute(f'SET ROLE "{alice}"')
    request = await one(aconn, "SELECT cronbox.backfill('mine', now() - interval '1 hour', now())")
    assert await one(aconn, "SELECT job, requested_by FROM cronbox.backfills") == ("mine", alice)
    assert await one(aconn, "SELECT cronbox.pause('mine', until => now() + interval '1 hour')")
    for call in ("SELECT cronbox.backfill('theirs', now() - interval '1 hour', now())",
                 "SELECT cronbox.pause('theirs', until => now() + interval '1 hour')"):
        await fails(aconn, "P0002", "^name: no schedule named 'theirs'", call)
    await aconn.execute(f'SET ROLE "{reader}"')
    assert await one(aconn, "SELECT count(*) FROM cronbox.backfills") == 1  # readers see them
    for call in ("SELECT cronbox.backfill('mine', now() - interval '1 hour', now())",
                 "SELECT cronbox.pause('mine', until => now() + interval '2 hours')"):
        await fails(aconn, "42501", "permission denied", call)
    await aconn.execute("RESET ROLE")
    assert await one(aconn, "SELECT count(*) FROM cronbox.backfill") == 1 and request
    assert await one(aconn, "SELECT changed_by FROM cronbox.schedule_changes WHERE job = 'mine' "
                            "AND action = 'backfill'") == alice


def test_the_reaper_lookups_read_their_partial_indexes(conn):
    # 20,000 jobs of which 3 are paused and 2 backfills pending: each lookup walks an index that
    # holds only its few rows. Two of the job table's partial indexes hold exactly the paused
    # jobs (job_paused_idx: paused; job_paused_until_idx: a pause with an end) and cost the same
    # at 3 rows, so the planner may take either: both read 3 entries, never the 20,000 rows.
    conn.execute("""INSERT INTO cronbox.job (name, kind, every, anchor, paused, paused_until)
                    SELECT 'j' || g, 'every', '1 hour', now(), g <= 3, CASE WHEN g <= 3 THEN now() END
                    FROM generate_series(1, 20000) g""")
    conn.execute(ADD_JOB_ROWS)
    conn.execute("""INSERT INTO cronbox.backfill (job_id, from_at, to_at, overlap, priority, requested_at, done_at)
                    SELECT job_id, now() - interval '1 day', now(), 'allow', 0, now(),
                           CASE WHEN job_id % 10000 <> 0 THEN now() END FROM cronbox.job""")
    conn.execute("ANALYZE cronbox.job")
    conn.execute("ANALYZE cronbox.backfill")
    for query, indexes, found in [
        ("SELECT j.name FROM cronbox.job j WHERE j.paused_until <= now() AND j.paused "
         "ORDER BY j.paused_until LIMIT 1000 FOR UPDATE SKIP LOCKED",
         {"job_paused_until_idx", "job_paused_idx"}, 3),
        ("SELECT b.backfill_id FROM cronbox.backfill b WHERE b.done_at IS NULL "
         "ORDER BY b.backfill_id LIMIT 10 FOR UPDATE SKIP LOCKED", {"backfill_pending_idx"}, 2),
    ]:
        plan = conn.execute("EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) " + query).fetchone()[0][0]["Plan"]
        read = [n for n in nodes(plan) if "Relation Name" in n and n["Node Type"] != "LockRows"]
        assert [n.get("Index Name") for n in read if n.get("Index Name") not in indexes] == [], plan
        assert sum(n["Actual Rows"] + n.get("Rows Removed by Filter", 0) for n in read) == found, plan


async def test_a_fixed_delay_job_resumed_by_its_until_fires_one_interval_after_it(aconn):
    await schedule(aconn, name="fd", every="10 minutes", every_mode="fixed_delay", p_now=T0)
    until = T0 + HOUR
    await one(aconn, "SELECT cronbox.pause_at('fd', until => %s, p_now => %s)", until, T0 + MIN)
    assert await one(aconn, "SELECT cronbox.resume_paused_at(10, p_now => %s)", until + 5 * SEC) == 1
    assert await one(aconn, "SELECT anchor FROM cronbox.job WHERE name = 'fd'") == until + 10 * MIN


async def test_a_request_whose_fires_cannot_be_stored_ends_and_the_others_go_on(aconn):
    for name in ("bad", "good"):
        await schedule(aconn, name=name, cron="*/10 * * * *", p_now=T0)
        await one(aconn, "SELECT cronbox.backfill_at(%s, %s, %s, p_now => %s)", name, T0, T0 + HOUR, T0 + HOUR)
    await saturate(aconn, T0 + HOUR)
    # fault injection (rolled back with the test): storing a backfilled future of 'bad' fails in SQL
    await aconn.execute("""
        CREATE FUNCTION cronbox.test_poison_backfill() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.origin = 'backfill' AND NEW.job_id = (SELECT j.job_id FROM cronbox.job j WHERE j.name = 'bad') THEN
                RAISE EXCEPTION 'poisoned future';
            END IF;
            RETURN NEW;
        END $$""")
    await aconn.execute("CREATE TRIGGER test_poison BEFORE INSERT ON cronbox.job_future "
                        "FOR EACH ROW EXECUTE FUNCTION cronbox.test_poison_backfill()")
    assert await _pass(aconn, T0 + HOUR) == (2, 5, 2)
    got = await rows(aconn, "SELECT job, state, fires, outcome FROM cronbox.backfills ORDER BY job")
    assert got[0][:3] == ("bad", "done", 0) and "cannot store fires: " in got[0][3] and "poisoned future" in got[0][3]
    assert got[1] == ("good", "done", 5, "done: 5 fires backfilled, 2 already ran or pending")
    assert await futures(aconn, "bad", origin="backfill") == []
    assert await futures(aconn, "good", origin="backfill") == [T0 + k * 10 * MIN for k in range(5)]


async def test_a_request_whose_fires_cannot_be_computed_ends_and_the_others_go_on(aconn):
    for name in ("bad", "good"):
        await schedule(aconn, name=name, cron="*/10 * * * *", p_now=T0)
        await one(aconn, "SELECT cronbox.backfill_at(%s, %s, %s, p_now => %s)", name, T0, T0 + HOUR, T0 + HOUR)
    await saturate(aconn, T0 + HOUR)  # catch-up 'latest': T0+10m..40m missed, 50m and 60m pending
    await aconn.execute("UPDATE cronbox.job SET cron_normalized = 'not a cron' WHERE name = 'bad'")
    assert await _pass(aconn, T0 + HOUR) == (2, 5, 2)
    got = await rows(aconn, "SELECT job, state, fires, outcome FROM cronbox.backfills ORDER BY job")
    assert got[0][:3] == ("bad", "done", 0) and "cannot compute fires" in got[0][3]
    assert got[1] == ("good", "done", 5, "done: 5 fires backfilled, 2 already ran or pending")
    assert await futures(aconn, "good", origin="backfill") == [T0 + k * 10 * MIN for k in range(5)]
