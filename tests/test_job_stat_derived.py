"""A one-off job's statistics as cronbox.schedules shows them: success, a failure, retried
attempts, a trigger() and a re-schedule() of a one-off, a lost run (against a twin one-off whose
statistics are written). The expected values are what the folded
path shows after the poller's fold (captured on the code that folds every job); a one-off whose
statistics are derived from its runs shows them at once, before any fold, and the same after.
"""

from __future__ import annotations

from datetime import timedelta

from .runs_support import T0, active, at, complete, dispatch, fail, fold, future

COLS = ("status", "last_fire_at", "last_run_state", "last_success_at", "consecutive_failures",
        "consecutive_crashes", "active_runs", "missed_count")


def one_off(conn, name: str, fire: float, **opts) -> int:
    """A one-off at at(fire), scheduled at T0 - 1 day (its future inserted as saturation would)."""
    opts.setdefault("overlap", "allow")  # folded, or derived: no policy reads its statistics
    args = "".join(f", {k} => %({k})s" for k in opts)
    job_id = conn.execute(f"SELECT cronbox.schedule_at(%(name)s, at => %(at)s{args}, p_now => %(now)s)",
                          {"name": name, "at": at(fire), "now": T0 - timedelta(days=1), **opts}).fetchone()[0]
    if not conn.execute("SELECT EXISTS (SELECT 1 FROM cronbox.job_future WHERE job_id = %s)", (job_id,)).fetchone()[0]:
        future(conn, name, fire)
    return job_id


def shown(conn, name: str) -> tuple:
    return conn.execute(f"SELECT {', '.join(COLS)} FROM cronbox.schedules WHERE name = %s", (name,)).fetchone()


def check(conn, name: str, expected: tuple, at_once: bool = True) -> None:
    """The view now (a derived one-off: exact at once) and after the poller's fold: both expected.
    at_once=False: a one-off made folded (trigger(), schedule()): after the fold only."""
    now = shown(conn, name)
    fold(conn)
    assert shown(conn, name) == expected
    if at_once:
        assert now == expected


def derived(conn, name: str) -> bool:
    return conn.execute("SELECT s.stats_from_runs FROM cronbox.job_stat s JOIN cronbox.job j USING (job_id) "
                        "WHERE j.name = %s", (name,)).fetchone()[0]


def changes(conn) -> int:
    return conn.execute("SELECT count(*) FROM cronbox.job_stat_change").fetchone()[0]


def test_a_one_off_that_succeeds_shows_its_run_at_once(conn):
    one_off(conn, "once", 0)
    assert derived(conn, "once")
    dispatch(conn, 0)
    assert changes(conn) == 0  # dispatch wrote no statistics for it
    check(conn, "once", ("active", at(0), "dispatched", None, 0, 0, 1, 0))
    complete(conn, active(conn, "once")[0], 5)
    assert changes(conn) == 0  # nor did the report
    check(conn, "once", ("active", at(0), "succeeded", at(5), 0, 0, 0, 0))


def test_a_batch_of_one_offs_acked_together_writes_no_statistics(conn):
    for i in range(3):
        one_off(conn, f"once{i}", 0)
    one_off(conn, "read", 0, overlap="skip")  # a policy reads it: written at once, as before
    dispatch(conn, 0)
    ids = [r for i in range(3) for r in active(conn, f"once{i}")]
    conn.execute("SELECT cronbox.complete_runs_at(%s, NULL, %s)", (ids, at(5)))
    assert changes(conn) == 0
    for i in range(3):
        check(conn, f"once{i}", ("active", at(0), "succeeded", at(5), 0, 0, 0, 0))


def test_a_one_off_that_fails_without_retry_counts_one_failure(conn):
    one_off(conn, "once", 0, max_attempts=1)
    dispatch(conn, 0)
    fail(conn, active(conn, "once")[0], 5)
    check(conn, "once", ("active", at(0), "failed", None, 1, 0, 0, 0))


def test_a_one_off_retried_twice_then_succeeding_counts_no_failure(conn):
    one_off(conn, "once", 0, max_attempts=3, retry_delay=timedelta(seconds=10))
    dispatch(conn, 0)
    fail(conn, active(conn, "once")[0], 5)
    check(conn, "once", ("active", at(0), "failed", None, 0, 0, 0, 0))
    dispatch(conn, 20)
    check(conn, "once", ("active", at(0), "dispatched", None, 0, 0, 1, 0))
    fail(conn, active(conn, "once")[0], 25)
    dispatch(conn, 60)
    complete(conn, active(conn, "once")[0], 65)
    check(conn, "once", ("active", at(0), "succeeded", at(65), 0, 0, 0, 0))


def test_a_one_off_whose_attempts_all_fail_counts_one_failure(conn):
    one_off(conn, "once", 0, max_attempts=2, retry_delay=timedelta(seconds=10))
    dispatch(conn, 0)
    fail(conn, active(conn, "once")[0], 5)
    dispatch(conn, 20)
    fail(conn, active(conn, "once")[0], 25)
    check(conn, "once", ("active", at(0), "failed", None, 1, 0, 0, 0))


def test_a_triggered_one_off_shows_every_run(conn):
    one_off(conn, "once", 0)
    dispatch(conn, 0)
    complete(conn, active(conn, "once")[0], 5)
    conn.execute("SELECT cronbox.trigger_at('once', NULL, NULL, %s)", (at(30),))
    assert not derived(conn, "once")  # its statistics written into its row, folded from now on
    check(conn, "once", ("active", at(30), "dispatched", at(5), 0, 0, 1, 0), at_once=False)
    fail(conn, active(conn, "once")[0], 35, retryable=False)
    check(conn, "once", ("active", at(30), "failed", at(5), 1, 0, 0, 0), at_once=False)


def test_a_one_off_rescheduled_to_a_new_time_keeps_its_first_run(conn):
    one_off(conn, "once", 0, max_attempts=1)
    dispatch(conn, 0)
    fail(conn, active(conn, "once")[0], 5)
    conn.execute("SELECT cronbox.schedule_at('once', at => %s, max_attempts => 1, overlap => 'allow', p_now => %s)", (at(100), at(10)))
    if not conn.execute("SELECT EXISTS (SELECT 1 FROM cronbox.job_future f JOIN cronbox.job j USING (job_id) "
                        "WHERE j.name = 'once')").fetchone()[0]:
        future(conn, "once", 100)
    dispatch(conn, 100)
    assert not derived(conn, "once")
    complete(conn, active(conn, "once")[0], 105)
    check(conn, "once", ("active", at(100), "succeeded", at(105), 0, 0, 0, 0), at_once=False)


def test_a_one_off_whose_lease_runs_out_shows_what_a_written_one_shows(conn):
    """A lost run (the lease runs out, the reaper retries it), the lost attempt's late report
    (recorded, never clobbering the retry), the retry lost too with no attempt left: at each step
    the derived one-off shows at once what the same one-off whose statistics are written (overlap
    'skip': a policy reads them) shows after a fold."""
    names = ("derived", "written")
    for name, overlap in zip(names, ("allow", "skip")):
        one_off(conn, name, 0, overlap=overlap, max_attempts=2, timeout=timedelta(seconds=30),
                retry_delay=timedelta(seconds=10), retry_max_delay=timedelta(seconds=10))
    assert derived(conn, "derived") and not derived(conn, "written")

    def lose(now: float) -> dict[str, int]:
        rids = {n: active(conn, n)[0] for n in names}
        for rid in rids.values():
            conn.execute("SELECT cronbox.start_run_at(%s, 'w', %s)", (rid, at(now)))
        assert conn.execute("SELECT cronbox.reap_lost_at(10, p_now => %s)", (at(now + 100),)).fetchone()[0] == 2
        return rids

    def same(state: str, crashes: int) -> None:
        at_once = shown(conn, "derived")
        fold(conn)
        assert shown(conn, "derived") == shown(conn, "written") == at_once
        assert (at_once[COLS.index("last_run_state")], at_once[COLS.index("consecutive_crashes")]) == (state, crashes)

    dispatch(conn, 0)
    first = lose(1)
    same("lost", 1)  # a lost attempt is a crash at once, retried or not (as for any job)
    dispatch(conn, 200)
    same("dispatched", 1)
    for rid in first.values():  # the lost attempt reports late: its retry is untouched
        complete(conn, rid, 201)
    same("dispatched", 1)
    lose(202)
    same("lost", 2)
    assert derived(conn, "derived")  # still derived: nothing here materializes it
