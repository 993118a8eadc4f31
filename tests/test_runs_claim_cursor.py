"""The pull claim's cursor (cronbox.claim_runs_at, docs/runs.md "Pulling runs"): a session's claim
starts after the last key (available_at, outbox_id) it took from the queue instead of walking
again past the entries of the runs already claimed; the cursor is only a hint (a run it passed
over is taken by the walk from the queue's start, when the walk from the cursor comes short
and the last such walk is a second old, or every ninth claim), two claimers never get the same run, and a claimed run comes back only by
its lease."""

from __future__ import annotations

import threading

import psycopg

from cronbox import db

from .plan_support import nodes, plans_of
from .runs_support import T0, at, dispatch, job


def _runs(conn: psycopg.Connection, name: str, count: int, queue: str = "pg") -> None:
    """`count` runs of a new job `name` on `queue`, one a second from T0, dispatched at 1 hour."""
    job(conn, name, queue=queue, overlap="allow", timeout="1 minute")
    conn.execute("INSERT INTO cronbox.job_future (job_id, fire_at, due_at, queue, bucket) "
                 "SELECT j.job_id, %s + make_interval(secs => g), %s + make_interval(secs => g), j.queue, j.bucket "
                 "FROM cronbox.job j, generate_series(1, %s) g WHERE j.name = %s", (T0, T0, count, name))
    while dispatch(conn, 3600)["dispatched"]:
        pass


def _claim(conn: psycopg.Connection, n: int, now: float = 3601, worker: str = "w1") -> list[int]:
    return [r[0] for r in conn.execute("SELECT run_id FROM cronbox.claim_runs_at('pg', %s, %s, p_now => %s)",
                                       (worker, n, at(now)))]


def _walk_buffers(conn: psycopg.Connection, n: int) -> tuple[int, int]:
    """(buffers, rows) of the claim statements' walks of outbox_queue_idx for one claim of n."""
    conn.execute("SET LOCAL auto_explain.log_buffers = on")
    plans = plans_of(conn, "SELECT * FROM cronbox.claim_runs_at('pg', 'w1', %s, p_now => %s)", (n, at(3601)),
                     analyze=True)
    walks = [x for p in plans for x in nodes(p["Plan"]) if x.get("Index Name") == "outbox_queue_idx"]
    assert walks
    return (sum(x.get("Shared Hit Blocks", 0) + x.get("Shared Read Blocks", 0) for x in walks),
            sum(x["Actual Rows"] for x in walks))


def test_a_claim_after_many_claimed_runs_walks_from_its_cursor_not_past_them(conn):
    """In one transaction the claimed rows' old entries stay in outbox_queue_idx, alive to the
    claimer's own snapshot as they are to any older snapshot under load: a walk from the queue's
    start fetches each of them from the heap again. The next claim reads as much whether 200 or
    3,000 runs were claimed before it (it starts after the last key taken)."""
    _runs(conn, "pulled", 4000)
    seen = {}
    for before in (200, 3000):
        while conn.execute("SELECT count(*) FROM cronbox.outbox WHERE state = 'running'").fetchone()[0] < before:
            left = before - conn.execute("SELECT count(*) FROM cronbox.outbox WHERE state = 'running'").fetchone()[0]
            assert len(_claim(conn, min(left, 1000))) == min(left, 1000)
        seen[before] = _walk_buffers(conn, 10)
    (small, rows_small), (large, rows_large) = seen[200], seen[3000]
    assert rows_small == rows_large == 10
    # a walk from the start past 3,000 claimed entries fetches hundreds of heap pages
    assert large <= small + 5, seen


def test_a_run_the_cursor_passed_over_is_taken_when_the_walk_from_it_comes_short(fresh_dsn):
    with db.connect(fresh_dsn) as setup:
        _runs(setup, "pulled", 30)
        first = setup.execute("SELECT min(outbox_id) FROM cronbox.outbox WHERE kind = 'run'").fetchone()[0]
    with db.connect(fresh_dsn) as claimer, db.connect(fresh_dsn, autocommit=False) as holder:
        holder.execute("SELECT 1 FROM cronbox.outbox WHERE outbox_id = %s FOR UPDATE", (first,))
        taken = [_claim(claimer, 5)]
        assert first not in taken[0] and len(taken[0]) == 5  # skipped: locked
        holder.rollback()
        while len(taken[-1]) == 5:
            taken.append(_claim(claimer, 5))
        # the claims from the cursor went on past it; the one that came short walks from the
        # queue's start only when the last such walk is a second old (an idle worker's polls
        # do not each walk the queue's past)
        assert [len(t) for t in taken] == [5, 5, 5, 5, 5, 4] and all(first not in t for t in taken), taken
        assert _claim(claimer, 5, now=3601.5) == []
        taken.append(_claim(claimer, 5, now=3602))
        assert taken[-1] == [first]
        every = [r for t in taken for r in t]
        assert len(every) == len(set(every)) == 30


def test_a_run_the_cursor_passed_over_waits_at_most_eight_claims_from_it(fresh_dsn):
    with db.connect(fresh_dsn) as setup:
        _runs(setup, "pulled", 100)
        first = setup.execute("SELECT min(outbox_id) FROM cronbox.outbox WHERE kind = 'run'").fetchone()[0]
    with db.connect(fresh_dsn) as claimer, db.connect(fresh_dsn, autocommit=False) as holder:
        holder.execute("SELECT 1 FROM cronbox.outbox WHERE outbox_id = %s FOR UPDATE", (first,))
        taken = [_claim(claimer, 5)]
        holder.rollback()
        for _ in range(9):
            taken.append(_claim(claimer, 5))
        # claims 2-9 from the cursor, the tenth from the queue's start: it takes the oldest first
        assert all(first not in t for t in taken[:9]), taken
        assert first in taken[9] and all(len(t) == 5 for t in taken)


def test_two_claimers_with_cursors_never_get_the_same_run_and_claimed_runs_come_back_only_by_their_lease(fresh_dsn):
    with db.connect(fresh_dsn) as setup:
        _runs(setup, "pulled", 3000)
    claims: dict[str, list[int]] = {"wa": [], "wb": []}
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def worker(name: str) -> None:
        try:
            with db.connect(fresh_dsn) as conn:
                start.wait()
                while ids := _claim(conn, 37, worker=name):
                    claims[name] += ids
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in claims]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    a, b = claims["wa"], claims["wb"]
    assert len(a) == len(set(a)) and len(b) == len(set(b)) and not set(a) & set(b)
    assert len(a) + len(b) == 3000
    with db.connect(fresh_dsn) as conn:
        # no claim gives a running run again, from a cursor or from the queue's start, before or
        # after its lease ran out: only the lease's rescue ends it (and a retry is a new run)
        for now in (3601, 3700):
            for _ in range(10):
                assert _claim(conn, 1000, now) == []
        assert conn.execute("SELECT count(*) FROM cronbox.outbox WHERE state = 'running'").fetchone()[0] == 3000
        assert conn.execute("SELECT cronbox.reap_lost_at(1000, p_now => %s)", (at(3700),)).fetchone()[0] == 1000
        assert conn.execute("SELECT count(*) FROM cronbox.outbox WHERE state = 'running'").fetchone()[0] == 2000
