"""Pull claims on real connections: two claimers taking small batches of one queue at once never
get the same run, and a claimed run comes back only by its lease (docs/runs.md)."""

from __future__ import annotations

import threading

import psycopg

from cronbox import db

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



def test_two_claimers_never_get_the_same_run_and_claimed_runs_come_back_only_by_their_lease(fresh_dsn):
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
        # no claim gives a running run again, before or after its lease ran out: only the
        # lease's rescue ends it (and a retry is a new run)
        for now in (3601, 3700):
            for _ in range(10):
                assert _claim(conn, 1000, now) == []
        assert conn.execute("SELECT count(*) FROM cronbox.outbox WHERE state = 'running'").fetchone()[0] == 3000
        assert conn.execute("SELECT cronbox.reap_lost_at(1000, p_now => %s)", (at(3700),)).fetchone()[0] == 1000
        assert conn.execute("SELECT count(*) FROM cronbox.outbox WHERE state = 'running'").fetchone()[0] == 2000
