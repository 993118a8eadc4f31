"""Job statistics off the hot path: a job whose statistics no policy reads while deciding (overlap
'allow', fixed rate, no dependency either way, no after-job naming it) has them written by the
poller's fold (cronbox.fold_job_stats), one change row per dispatch or finishing call; every
other job has them written where they are read. The fold gives the same statistics as writing
them at once, whenever it runs; a job that starts being read has its pending changes folded first.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from .runs_support import active, at, complete, dispatch, fail, fold, future, job

STATS = ("active_runs", "consecutive_failures", "consecutive_crashes", "missed_count", "last_fire_at",
         "last_run_state", "last_success_at")


def stats(conn, name: str) -> dict:
    """The statistics row as it is, not folded first."""
    cur = conn.execute(f"SELECT {', '.join('s.' + c for c in STATS)}, s.last_run_id "
                       "FROM cronbox.job_stat s JOIN cronbox.job j USING (job_id) WHERE j.name = %s", (name,))
    return dict(zip([d.name for d in cur.description], cur.fetchone()))


def changes(conn) -> int:
    return conn.execute("SELECT count(*) FROM cronbox.job_stat_change").fetchone()[0]


def start(conn, name: str, t: float) -> int:
    future(conn, name, t)
    dispatch(conn, t)
    return active(conn, name)[-1]


def test_a_job_no_policy_reads_writes_one_change_row_per_call_and_the_fold_writes_its_statistics(conn):
    job(conn, "free", overlap="allow")
    job(conn, "read", overlap="skip")
    before = stats(conn, "free")
    future(conn, "free", 0)
    future(conn, "read", 0)
    dispatch(conn, 0)
    assert changes(conn) == 1  # the dispatch call's row, for "free" only
    assert stats(conn, "free") == before
    assert stats(conn, "read")["active_runs"] == 1  # written where the overlap policy reads it
    conn.execute("SELECT cronbox.complete_runs_at(%s, NULL, %s)",
                 (active(conn, "free") + active(conn, "read"), at(1)))
    assert changes(conn) == 2
    assert stats(conn, "free") == before
    assert stats(conn, "read")["last_run_state"] == "succeeded"
    assert conn.execute("SELECT cronbox.fold_job_stats(1000)").fetchone()[0] == 2
    assert changes(conn) == 0
    s = stats(conn, "free")
    assert (s["active_runs"], s["last_run_state"], s["last_success_at"], s["last_fire_at"]) == (0, "succeeded", at(1), at(0))
    assert conn.execute("SELECT cronbox.fold_job_stats(1000)").fetchone()[0] == 0  # nothing left


@pytest.mark.parametrize("fold_every", [1, 2, 3, 100])
def test_folded_statistics_equal_those_written_at_once_whenever_the_fold_runs(conn, fold_every):
    """The same runs for a job written at once ('cancel_other' never cancels runs that do not
    overlap) and a folded one ('allow'); the fold after every k-th step."""
    for name, overlap in (("now", "cancel_other"), ("later", "allow")):
        job(conn, name, overlap=overlap, timeout="30 seconds")
    steps = 0

    def step(name: str, t: float, outcome: str) -> None:
        nonlocal steps
        rid = start(conn, name, t)
        if outcome == "ok":
            complete(conn, rid, t + 1)
        elif outcome == "fail":
            fail(conn, rid, t + 1)
        elif outcome == "fatal":
            fail(conn, rid, t + 1, retryable=False)
        else:  # lost: the lease runs out
            conn.execute("SELECT cronbox.start_run_at(%s, 'w', %s)", (rid, at(t + 1)))
            conn.execute("SELECT cronbox.reap_lost_at(10, p_now => %s)", (at(t + 100),))
        steps += 1
        if steps % fold_every == 0:
            fold(conn)

    plan = ["fail", "fatal", "lost", "ok", "fatal", "lost", "lost", "fatal", "ok", "lost", "fail"]
    for i, outcome in enumerate(plan):
        for name in ("now", "later"):
            step(name, 1000.0 * i, outcome)
    fold(conn)
    now, later = stats(conn, "now"), stats(conn, "later")
    assert later.pop("last_run_id") > now.pop("last_run_id")
    assert later == now
    assert (now["consecutive_failures"], now["consecutive_crashes"], now["active_runs"]) == (2, 1, 0)  # a lost run is a failure too
    assert changes(conn) == 0


def test_a_job_that_gets_an_overlap_policy_has_its_pending_statistics_folded_at_once(conn):
    job(conn, "swap", overlap="allow")
    start(conn, "swap", 0)
    assert stats(conn, "swap")["active_runs"] == 0  # the run is counted by the fold
    conn.execute("SELECT cronbox.schedule_at('swap', every => '1 hour', overlap => 'skip', p_now => %s)", (at(1),))
    assert stats(conn, "swap")["active_runs"] == 1  # before any poller folds: the policy reads it
    future(conn, "swap", 2)
    dispatch(conn, 2)
    assert [r[0] for r in conn.execute(
        "SELECT state FROM cronbox.runs WHERE job = 'swap' ORDER BY run_id")] == ["dispatched", "skipped"]
    fold(conn)  # the change row left behind is skipped, not counted twice
    assert stats(conn, "swap")["active_runs"] == 1


def test_an_upstream_gains_a_dependent_with_its_last_success_folded(conn):
    job(conn, "up", overlap="allow")
    job(conn, "down", overlap="allow")
    complete(conn, start(conn, "up", 0), 1)
    assert stats(conn, "up")["last_success_at"] is None
    conn.execute("SELECT cronbox.add_dependency_at('down', 'up', p_now => %s)", (at(2),))
    assert stats(conn, "up")["last_success_at"] == at(1)
    future(conn, "down", 3)
    assert dispatch(conn, 3)["dispatched"] == 1  # the gate saw the success, no fold needed
    # an upstream's success is written where it is read from now on
    complete(conn, start(conn, "up", 10), 11)
    assert stats(conn, "up")["last_success_at"] == at(11)


def test_an_after_jobs_upstream_has_its_statistics_written_at_once(conn):
    job(conn, "a", overlap="allow")
    job(conn, "b", overlap="allow")
    conn.execute("SELECT cronbox.schedule_at('ab', after => ARRAY['a', 'b'], p_now => %s)", (at(0),))
    complete(conn, start(conn, "a", 1), 2)
    assert stats(conn, "a")["last_success_at"] == at(2)
    complete(conn, start(conn, "b", 3), 4)
    assert conn.execute("SELECT count(*) FROM cronbox.job_future f JOIN cronbox.job j USING (job_id) "
                        "WHERE j.name = 'ab'").fetchone()[0] == 1  # fired once both succeeded
    assert changes(conn) == 0


def test_a_backfilled_fire_with_its_own_overlap_policy_reads_exact_active_runs(conn):
    job(conn, "bf", overlap="allow")
    start(conn, "bf", 0)  # in flight, counted only in a change row
    conn.execute(
        "INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at, origin, overlap) "
        "SELECT job_id, bucket, %s, %s, 'backfill', 'skip' FROM cronbox.job WHERE name = 'bf'", (at(-500), at(1)))
    dispatch(conn, 1)
    assert [r[0] for r in conn.execute(
        "SELECT state FROM cronbox.runs WHERE job = 'bf' ORDER BY run_id")] == ["dispatched", "skipped"]
    fold(conn)
    assert stats(conn, "bf")["active_runs"] == 1


def test_one_poller_folds_at_a_time(fresh_dsn):
    with psycopg.connect(fresh_dsn, autocommit=True) as setup:
        setup.execute("SELECT cronbox.schedule('solo', every => '1 hour', overlap => 'allow')")
        setup.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) "
                      "SELECT job_id, bucket, now(), now() FROM cronbox.job WHERE name = 'solo'")
        setup.execute("SELECT cronbox.dispatch(10)")
    with psycopg.connect(fresh_dsn) as first, psycopg.connect(fresh_dsn) as second:
        assert first.execute("SELECT cronbox.fold_job_stats(10)").fetchone()[0] == 1
        # the first fold's transaction is open: another poller's fold returns at once
        second.execute("SET lock_timeout = '5s'")
        assert second.execute("SELECT cronbox.fold_job_stats(10)").fetchone()[0] == 0
        first.commit()
        second.rollback()
        assert second.execute("SELECT s.active_runs FROM cronbox.job_stat s JOIN cronbox.job j USING (job_id) "
                              "WHERE j.name = 'solo'").fetchone()[0] == 1
        assert second.execute("SELECT cronbox.fold_job_stats(10)").fetchone()[0] == 0


def test_the_fold_batch_is_checked(conn):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="^p_limit: must be between 1 and"):
        conn.execute("SELECT cronbox.fold_job_stats(0)")


def test_the_fold_never_waits_for_a_job_held_elsewhere_and_folds_the_others(fresh_dsn):
    """A caller holding jobs' locks in its own order (a statement triggering many jobs, a
    transaction left open after pause()) never deadlocks with the fold nor holds it up: the fold
    folds the jobs it can lock at once and keeps the changes of the others for a later round."""
    with psycopg.connect(fresh_dsn, autocommit=True) as setup:
        setup.execute("SELECT cronbox.schedule('held-' || i, every => '1 hour', overlap => 'allow') "
                      "FROM generate_series(1, 3) i")
        setup.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) "
                      "SELECT job_id, bucket, now(), now() FROM cronbox.job WHERE name LIKE 'held-%'")
        setup.execute("SELECT cronbox.dispatch(10)")  # one change row naming the three jobs
        setup.execute("INSERT INTO cronbox.job_future (job_id, fire_at, due_at) "
                      "SELECT job_id, now() + interval '1 second', now() FROM cronbox.job WHERE name = 'held-3'")
        setup.execute("SELECT cronbox.dispatch(10)")  # a second one, for held-3 alone

    def active_runs(c) -> dict:
        return dict(c.execute("SELECT j.name, s.active_runs FROM cronbox.job_stat s JOIN cronbox.job j "
                              "USING (job_id) WHERE j.name LIKE 'held-%' ORDER BY 1").fetchall())

    with psycopg.connect(fresh_dsn) as holder, psycopg.connect(fresh_dsn) as poller:
        holder.execute("SELECT cronbox.pause('held-2')")  # takes held-2's lock and keeps it
        poller.execute("SET lock_timeout = '10s'")  # the fold's own bound must be what returns
        assert poller.execute("SELECT cronbox.fold_job_stats(100)").fetchone()[0] == 1  # held-3's own row
        poller.commit()
        assert active_runs(poller) == {"held-1": 1, "held-2": 0, "held-3": 2}
        assert changes(poller) == 1  # the row naming held-2 stays
        holder.commit()
        assert poller.execute("SELECT cronbox.fold_job_stats(100)").fetchone()[0] == 1
        poller.commit()
        assert active_runs(poller) == {"held-1": 1, "held-2": 1, "held-3": 2}  # folded once each
        assert changes(poller) == 0


def test_the_fold_knows_every_run_state(conn):
    """The fold passes each job's last run state as its position in a list of the run states
    (apply_job_stat_changes): the list is run_state_valid's, so no state folds to nothing."""
    allowed = conn.execute(
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conname = 'run_state_valid' AND conrelid = 'cronbox.run'::regclass").fetchone()[0]
    body = conn.execute("SELECT prosrc FROM pg_proc WHERE proname = 'apply_job_stat_changes'").fetchone()[0]
    states = "{dispatched,delivered,running,succeeded,failed,lost,cancelled,skipped,missed}"
    assert body.count(f"'{states}'::text[]") == 2  # one statement, run once or twice
    assert sorted(states.strip("{}").split(",")) == sorted(
        s.split("'")[1] for s in allowed.split("ARRAY[")[1].split(",")), allowed


# Each shape of job, set up by its callable, and whether its statistics are folded (no policy
# reads them while deciding). The unrelated dependency and after-job make the finishing calls
# leave their "no dependency / no after-job at all" shortcuts for the per-job tests.
def _gated(conn):
    job(conn, "other", overlap="allow")
    conn.execute("SELECT cronbox.add_dependency_at('shaped', 'other', p_now => %s)", (at(-3),))
    complete(conn, start(conn, "other", -2), -1)  # the gate open for the shaped job's fire


def _upstream(conn):
    job(conn, "other", overlap="allow")
    conn.execute("SELECT cronbox.add_dependency_at('other', 'shaped', p_now => %s)", (at(-1),))


def _named_by_an_after_job(conn):
    conn.execute("SELECT cronbox.schedule_at('after-shaped', after => ARRAY['shaped'], p_now => %s)", (at(-1),))


def _unrelated_dependency(conn):
    job(conn, "x", overlap="allow")
    job(conn, "y", overlap="allow")
    conn.execute("SELECT cronbox.add_dependency_at('x', 'y', p_now => %s)", (at(-1),))


def _unrelated_after_job(conn):
    job(conn, "nobody", overlap="allow")
    conn.execute("SELECT cronbox.schedule_at('after-nobody', after => ARRAY['nobody'], p_now => %s)", (at(-1),))


SHAPES = {
    "allow": ({"overlap": "allow"}, None),
    "skip": ({"overlap": "skip"}, None),
    "fixed delay": ({"overlap": "allow", "every_mode": "fixed_delay"}, None),
    "gated": ({"overlap": "allow"}, _gated),
    "upstream": ({"overlap": "allow"}, _upstream),
    "named by an after-job": ({"overlap": "allow"}, _named_by_an_after_job),
    "allow beside an unrelated dependency": ({"overlap": "allow"}, _unrelated_dependency),
    "allow beside an unrelated after-job": ({"overlap": "allow"}, _unrelated_after_job),
}


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("end", ["complete_run", "complete_runs with another job's run", "fail_run"])
def test_every_finishing_path_folds_exactly_the_jobs_job_stat_folded_names(conn, shape, end):
    """finish_runs writes cronbox.job_stat_folded's test out in each of its paths (one run
    succeeding, a batch, the bookkeeping of any end, failures included): Citus plans no SQL
    function reading a table inside a data-modifying statement. Each path must still fold
    exactly the jobs the function names, whatever the job's shape."""
    opts, setup = SHAPES[shape]
    job(conn, "shaped", **opts)
    job(conn, "free", overlap="allow")
    if setup:
        setup(conn)
    fold(conn)
    shaped = start(conn, "shaped", 0)
    fold(conn)  # the dispatch's own change row, if any: only the finishing call's is looked at
    expected = conn.execute(
        "SELECT t.folded FROM cronbox.job j CROSS JOIN LATERAL cronbox.job_stat_folded("
        " j.job_id, j.overlap, j.every_mode, j.name,"
        " ARRAY(SELECT e.upstream FROM cronbox.job_after_edge e)) t WHERE j.name = 'shaped'").fetchone()[0]
    assert expected is (shape.startswith("allow"))
    before = stats(conn, "shaped")
    if end == "complete_run":
        complete(conn, shaped, 1)
    elif end == "fail_run":
        fail(conn, shaped, 1, retryable=False)
    else:
        free = start(conn, "free", 0)
        fold(conn)
        conn.execute("SELECT cronbox.complete_runs_at(%s, NULL, %s)", ([shaped, free], at(1)))
    in_change_rows = conn.execute(
        "SELECT count(*) FROM cronbox.job_stat_change c, cronbox.job j"
        " WHERE j.name = 'shaped' AND j.job_id = ANY (c.job_ids)").fetchone()[0] > 0
    assert in_change_rows is expected
    state = "failed" if end == "fail_run" else "succeeded"
    if expected:
        assert stats(conn, "shaped") == before  # left to the fold
        fold(conn)
    assert stats(conn, "shaped")["last_run_state"] == state
    assert stats(conn, "shaped")["active_runs"] == 0


def _change(conn, bucket: int | None, entries: dict[int, int]) -> int:
    """A change row naming these jobs (job id -> change of active runs), written as a writer would."""
    ids = sorted(entries)
    n = len(ids)
    return conn.execute(
        "INSERT INTO cronbox.job_stat_change (job_ids, active, last_fire, last_run, last_state, ok, failures,"
        " crashes, missed, success_at, bucket) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING change_id",
        (ids, [entries[i] for i in ids], [None] * n, [-1] * n, [None] * n, [0] * n, [0] * n, [0] * n, [0] * n,
         at(0), bucket)).fetchone()[0]


def _move(conn, name: str, bucket: int) -> int:
    """Job `name` into `bucket` (its job and statistics rows), as a database with buckets has it."""
    job_id = conn.execute("UPDATE cronbox.job SET bucket = %s WHERE name = %s RETURNING job_id", (bucket, name)).fetchone()[0]
    conn.execute("UPDATE cronbox.job_stat SET bucket = %s WHERE job_id = %s", (bucket, job_id))
    return job_id


def test_a_fold_of_one_bucket_folds_its_rows_alone_beside_other_buckets_folds_never_beside_a_fold_of_all(fresh_dsn):
    """cronbox.fold_job_stats(limit, p_bucket): the change rows of that bucket (its jobs' every
    change: each row carries its jobs' bucket), folded into those jobs' statistics, the others
    left; folds of two buckets run side by side, but never beside a fold of every bucket (which
    would take a job's older rows while the bucket's fold took its newer ones)."""
    with psycopg.connect(fresh_dsn, autocommit=True) as setup:
        setup.execute("SELECT cronbox.schedule(n, every => '1 hour', overlap => 'allow') FROM unnest('{b0,b7}'::text[]) n")
        b0 = setup.execute("SELECT job_id FROM cronbox.job WHERE name = 'b0'").fetchone()[0]
        b7 = _move(setup, "b7", 7)
        _change(setup, 0, {b0: 1})
        _change(setup, 7, {b7: 2})

    def active_runs(c) -> dict:
        return dict(c.execute("SELECT j.name, s.active_runs FROM cronbox.job_stat s JOIN cronbox.job j "
                              "USING (job_id) ORDER BY 1").fetchall())

    with psycopg.connect(fresh_dsn) as first, psycopg.connect(fresh_dsn) as second:
        assert first.execute("SELECT cronbox.fold_job_stats(100, 7)").fetchone()[0] == 1
        first.commit()
        assert active_runs(first) == {"b0": 0, "b7": 2}
        assert first.execute("SELECT bucket FROM cronbox.job_stat_change").fetchall() == [(0,)]
        _change(first, 7, {b7: 3})
        first.commit()
        # a fold of bucket 0 open: bucket 7's folds go on, a fold of every bucket returns at once
        assert first.execute("SELECT cronbox.fold_job_stats(100, 0)").fetchone()[0] == 1
        assert second.execute("SELECT cronbox.fold_job_stats(100)").fetchone()[0] == 0
        second.rollback()
        assert second.execute("SELECT cronbox.fold_job_stats(100, 7)").fetchone()[0] == 1
        assert second.execute("SELECT cronbox.fold_job_stats(100, 0)").fetchone()[0] == 0  # held by the first
        second.commit()
        first.commit()
        assert active_runs(first) == {"b0": 1, "b7": 5}
        # a fold of every bucket open: a fold of one bucket returns at once
        _change(first, 7, {b7: -5})
        _change(first, 0, {b0: -1})
        first.commit()
        assert first.execute("SELECT cronbox.fold_job_stats(1)").fetchone()[0] == 1  # the oldest row, of bucket 7
        assert second.execute("SELECT cronbox.fold_job_stats(100, 0)").fetchone()[0] == 0
        second.rollback()
        first.commit()
        assert second.execute("SELECT cronbox.fold_job_stats(100, 0)").fetchone()[0] == 1
        second.commit()
        assert active_runs(first) == {"b0": 0, "b7": 0}
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="^p_bucket: must be NULL or a bucket"):
            first.execute("SELECT cronbox.fold_job_stats(100, -1)")


def test_migration_0474_gives_every_change_row_its_jobs_bucket_keeping_each_job_s_order(conn):
    """Migration 0474 on change rows written before it (bucket NULL): a row whose jobs share a
    bucket gets it in place; a row naming jobs of several buckets (a database with buckets whose
    tables were still local) is split into a row per bucket, written again with every row after
    it in change_id order (so each job's changes keep their order), without the entries a fold of
    their job alone had folded already; then the column is NOT NULL."""
    x, y, z = (job(conn, n, overlap="allow") for n in ("x", "y", "z"))
    _move(conn, "y", 5)
    conn.execute("ALTER TABLE cronbox.job_stat_change ALTER COLUMN bucket DROP NOT NULL")
    conn.execute("DELETE FROM cronbox.job_stat_change")
    r1 = _change(conn, None, {x: 1})
    _change(conn, None, {x: 2, y: 3, z: 4})
    r3 = _change(conn, 0, {x: 5, z: 6})
    r4 = _change(conn, None, {y: 7})
    conn.execute("UPDATE cronbox.job_stat SET folded_through = %s WHERE job_id = %s", (r3, z))  # z folded alone
    conn.execute((Path(__file__).parents[1] / "sql/migrations/0474_job_stat_change_bucket_not_null.sql").read_text())
    got = conn.execute("SELECT change_id, bucket, job_ids, active FROM cronbox.job_stat_change ORDER BY change_id").fetchall()
    assert got[0] == (r1, 0, [x], [1])
    assert all(r[0] > r4 for r in got[1:])
    assert [r[1:] for r in got[1:]] == [(0, [x], [2]), (5, [y], [3]), (0, [x], [5]), (5, [y], [7])], got
    assert conn.execute("SELECT attnotnull FROM pg_attribute WHERE attrelid = 'cronbox.job_stat_change'::regclass"
                        " AND attname = 'bucket'").fetchone()[0]
