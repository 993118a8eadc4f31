"""Nothing the poller computes holds up a due fire: with a real `cronbox poller`, an every-second
canary on its own queue stays on time while another tenant creates, in one transaction,
hundreds of schedules that start a year back with catch-up 'all' (bench/canary.py runs the
full-size loads: a thousand catch-ups, a hundred year-long backfills, a million schedules)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from cronbox import db

from .procs import Proc, wait_until

CATCHUPS = 300
WATCH = timedelta(seconds=15)

CREATE = """
SELECT count(cronbox.schedule(
    'year-' || g,
    cron => (ARRAY['0 * * * *', '*/15 * * * *', '30 2 * * *', '*/5 * * * *', '0 0 29 2 *'])[1 + g %% 5],
    timezone => (ARRAY['UTC', 'Europe/Berlin', 'America/New_York', 'Australia/Lord_Howe'])[1 + g %% 4],
    starts_at => now() - interval '1 year' + g * interval '7 hours',
    catchup => 'all', catchup_window => '366 days', queue => 'tenant', overlap => 'allow'))
FROM generate_series(1, %s) g"""

LONGEST_TRANSACTION = """
SELECT coalesce(max(clock_timestamp() - xact_start), interval '0'),
       (array_agg(left(query, 80) ORDER BY xact_start))[1]
FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
  AND state <> 'idle' AND xact_start IS NOT NULL"""


@pytest.mark.slow
def test_an_every_second_canary_stays_on_time_while_a_year_of_catch_ups_is_created_at_once(fresh_dsn, tmp_path):
    with db.connect(fresh_dsn) as conn:
        conn.execute("SELECT cronbox.schedule('canary', every => '1 second', queue => 'canary', overlap => 'allow')")
    with Proc("poller", fresh_dsn, tmp_path) as poller, db.connect(fresh_dsn) as watch:
        def canary_runs() -> int:
            return watch.execute("SELECT count(*) FROM cronbox.runs WHERE job = 'canary'").fetchone()[0]
        wait_until(lambda: canary_runs() >= 3, timeout=60, what="the canary running")

        with db.connect(fresh_dsn) as conn, conn.transaction():
            assert conn.execute(CREATE, (CATCHUPS,)).fetchone()[0] == CATCHUPS
        t0 = watch.execute("SELECT now()").fetchone()[0]

        # Watch the database for WATCH: the longest open transaction of any other session (the
        # poller's: claims hold job locks until they commit), sampled as often as it answers.
        longest, longest_query = timedelta(0), None
        while watch.execute("SELECT clock_timestamp() < %s", (t0 + WATCH,)).fetchone()[0]:
            age, query = watch.execute(LONGEST_TRANSACTION).fetchone()
            if age > longest:
                longest, longest_query = age, query
        # the catch-up was being worked on meanwhile, not postponed
        caught_up = watch.execute(
            "SELECT count(*) FROM cronbox.runs WHERE queue = 'tenant' AND fire_at < %s", (t0,)).fetchone()[0]
        assert poller.terminate() == 0, poller.output

    with db.connect(fresh_dsn) as conn:
        fires = conn.execute(
            "SELECT fire_at, state, extract(epoch FROM dispatched_at - fire_at) FROM cronbox.runs "
            "WHERE job = 'canary' AND fire_at > %s AND fire_at <= %s ORDER BY fire_at", (t0, t0 + WATCH)).fetchall()
        quarantined = conn.execute("SELECT count(*) FROM cronbox.job WHERE paused").fetchone()[0]
    assert quarantined == 0
    assert caught_up >= 1000, "the catch-up made no progress while the canary was watched"
    assert len(fires) >= WATCH.total_seconds() - 1
    assert all(b[0] - a[0] == timedelta(seconds=1) for a, b in zip(fires, fires[1:])), "a canary fire is missing"
    assert {state for _, state, _ in fires} <= {"dispatched"}, fires
    lags = sorted(float(lag) for _, _, lag in fires)
    assert lags[-1] < 1.0, f"canary fire -> dispatch lags {lags}"
    assert longest < timedelta(seconds=1), f"a transaction stayed open {longest}: {longest_query}"


# Large enough that dispatching it takes seconds on a quiet machine (50,000 took under two since
# dispatch's cuts, leaving one canary fire in the window), so several canary fires come due meanwhile.
BACKLOG = 150_000


@pytest.mark.slow
def test_an_every_second_canary_stays_on_time_while_another_queue_has_a_backlog_of_due_fires(fresh_dsn, tmp_path):
    # A million every-minute schedules' minute boundary, in small: 50,000 fires due at once in
    # one queue. Dispatch shares each batch between the queues with due work, so the canary's
    # fire goes in the first batch after it comes due, not behind the backlog.
    with db.connect(fresh_dsn) as conn:
        conn.execute("SELECT cronbox.schedule('canary', every => '1 second', queue => 'canary', overlap => 'allow')")
    with Proc("poller", fresh_dsn, tmp_path) as poller, db.connect(fresh_dsn) as watch:
        wait_until(lambda: watch.execute("SELECT count(*) FROM cronbox.runs WHERE job = 'canary'").fetchone()[0] >= 3,
                   timeout=60, what="the canary running")
        with db.connect(fresh_dsn) as conn, conn.transaction():
            conn.execute("INSERT INTO cronbox.job (name, kind, at, finished_at, overlap, queue) "
                         "SELECT 'bulk-' || i, 'at', now(), now(), 'allow', 'bulk' FROM generate_series(1, %s) i",
                         (BACKLOG,))
            conn.execute("SELECT cronbox.add_job_rows(ARRAY(SELECT job_id FROM cronbox.job WHERE queue = 'bulk'))")
            conn.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at, queue) "
                         "SELECT job_id, bucket, now(), now(), queue FROM cronbox.job WHERE queue = 'bulk'")
        t0 = watch.execute("SELECT now()").fetchone()[0]

        def backlog() -> int:
            return watch.execute("SELECT count(*) FROM cronbox.job_future WHERE queue = 'bulk'").fetchone()[0]
        wait_until(lambda: backlog() == 0, timeout=180, what="the backlog dispatched")
        t1 = watch.execute("SELECT now()").fetchone()[0]
        assert poller.terminate() == 0, poller.output

    with db.connect(fresh_dsn) as conn:
        fires = conn.execute(
            "SELECT fire_at, state, extract(epoch FROM dispatched_at - fire_at) FROM cronbox.runs "
            "WHERE job = 'canary' AND fire_at > %s AND fire_at <= %s ORDER BY fire_at", (t0, t1)).fetchall()
        bulk = conn.execute("SELECT count(*) FROM cronbox.runs WHERE queue = 'bulk' AND state = 'dispatched'").fetchone()[0]
    assert bulk == BACKLOG
    # the backlog took seconds to dispatch: the canary's fires meanwhile are what is checked
    assert len(fires) >= 2 and len(fires) >= (t1 - t0).total_seconds() - 1, (t0, t1, fires)
    assert all(b[0] - a[0] == timedelta(seconds=1) for a, b in zip(fires, fires[1:])), "a canary fire is missing"
    assert {state for _, state, _ in fires} <= {"dispatched"}, fires
    lags = sorted(float(lag) for _, _, lag in fires)
    assert lags[-1] < 1.0, f"canary fire -> dispatch lags {lags} while {BACKLOG} fires of another queue were due"
