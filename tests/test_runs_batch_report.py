"""A batch of successes (the relay's ack with its worker's answers, complete_runs): when ending
them asks for nothing but their history rows and one change row, cronbox.finish_runs ends them
in two statements (step 0b); a batch with anything more (a job a policy reads, a held fire, a
limited queue, a run not in flight, a job an after-job names) goes the general way. Either way each run ends
the same, and a run another report ended between the batch's read and its locks is a late report."""

from __future__ import annotations

import threading
from typing import Any

from psycopg.types.json import Jsonb

from cronbox import db

from .runs_support import active, at, complete, dispatch, fold, future, futures, job, runs

# the columns of a finished run that do not name the run or its job
SAME = ("state", "attempt", "origin", "fire_at", "due_at", "delivered_at", "started_at", "finished_at",
        "worker", "cancel_requested", "result", "error", "queue", "priority", "payload")


def start(conn, name: str, t: float) -> int:
    future(conn, name, t)
    dispatch(conn, t)
    return active(conn, name)[-1]


def last_change(conn) -> int:
    return conn.execute("SELECT coalesce(max(change_id), 0) FROM cronbox.job_stat_change").fetchone()[0]


def change_rows(conn, after: int) -> list[tuple]:
    return conn.execute("SELECT job_ids, active, last_fire, last_run, last_state, ok, failures, crashes, missed, "
                        "success_at FROM cronbox.job_stat_change WHERE change_id > %s ORDER BY change_id",
                        (after,)).fetchall()


def ended(conn, name: str) -> dict:
    [row] = runs(conn, name)
    return {k: row[k] for k in SAME}


def complete_batch(conn, run_ids: list[int], t: float, results: list[Any] | None = None) -> list[tuple]:
    return conn.execute("SELECT run_id, state, verdict FROM cronbox.complete_runs_at(%s, %s, %s)",
                        (run_ids, [Jsonb(r) if r is not None else None for r in results] if results else None,
                         at(t))).fetchall()


def stat(conn, name: str) -> tuple:
    return conn.execute("SELECT s.active_runs, s.last_run_state, s.last_run_id FROM cronbox.job_stat s "
                        "JOIN cronbox.job j USING (job_id) WHERE j.name = %s", (name,)).fetchone()


def test_a_batch_of_successes_ends_each_run_as_the_general_way_does(conn):
    """Two batches of two runs of jobs no policy reads, one with an unknown id beside (the
    general path): the same history rows, change rows of the same meaning, the same statistics
    once folded."""
    for name in ("a1", "a2", "b1", "b2"):
        job(conn, name, overlap="allow", payload=Jsonb({"n": name[-1]}))
    ids = {name: start(conn, name, 0) for name in ("a1", "a2", "b1", "b2")}
    conn.execute("SELECT cronbox.start_run_at(%s, 'w1', %s)", (ids["a2"], at(1)))
    conn.execute("SELECT cronbox.start_run_at(%s, 'w1', %s)", (ids["b2"], at(1)))
    mark = last_change(conn)
    assert complete_batch(conn, [ids["a1"], ids["a2"]], 2, [{"rows": 1}, None]) \
        == [(ids["a1"], "succeeded", "finished"), (ids["a2"], "succeeded", "finished")]
    fast = change_rows(conn, mark)
    mark = last_change(conn)
    assert complete_batch(conn, [ids["b1"], ids["b2"], 1], 2, [{"rows": 1}, None, None]) \
        == [(ids["b1"], "succeeded", "finished"), (ids["b2"], "succeeded", "finished"), (1, None, "not_found")]
    general = change_rows(conn, mark)

    assert ended(conn, "a1") == ended(conn, "b1")
    assert ended(conn, "a2") == ended(conn, "b2")
    assert ended(conn, "a1")["result"] == {"rows": 1} and ended(conn, "a2")["worker"] == "w1"
    assert conn.execute("SELECT count(*) FROM cronbox.outbox WHERE kind = 'run'").fetchone()[0] == 0

    def meaning(rows: list[tuple], run_ids: list[int]) -> list[tuple]:
        # one row per call; the job and run ids differ between the two, the rest must not
        [r] = rows
        by_job = sorted(zip(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8]))
        return [x[1:3] + x[4:] for x in by_job] + [sorted(x[3] for x in by_job) == sorted(run_ids), r[9]]

    assert meaning(fast, [ids["a1"], ids["a2"]]) == meaning(general, [ids["b1"], ids["b2"]])
    assert fast[0][0] == sorted(fast[0][0])  # in job_id order
    fold(conn)
    for name in ("a1", "a2", "b1", "b2"):
        assert stat(conn, name) == (0, "succeeded", ids[name])


def test_a_batch_with_a_job_a_policy_reads_ends_every_run_the_general_way(conn):
    """Beside a job no policy reads: a job with an overlap policy (statistics written at once),
    a job with a held backfilled fire (released), a job in a limited queue (its slot freed), an
    upstream of an after-job (which fires): each batch of two ends both runs, with every
    consequence."""
    conn.execute("SELECT cronbox.set_queue_limit_at('narrow', 5, %s)", (at(0),))
    job(conn, "plain", overlap="allow")
    job(conn, "skipper", overlap="skip")
    job(conn, "held", overlap="allow")
    job(conn, "limited", overlap="allow", queue="narrow")
    job(conn, "upstream", overlap="allow")
    plain = [start(conn, "plain", 0)]
    skipper = start(conn, "skipper", 0)
    held = start(conn, "held", 0)
    conn.execute(
        "INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at, origin, overlap, queue) "
        "SELECT job_id, bucket, %s, %s, 'backfill', 'buffer_one', queue FROM cronbox.job WHERE name = 'held'",
        (at(-500), at(1)))
    dispatch(conn, 1)
    assert [f["hold"] for f in futures(conn, "held")] == ["overlap"]
    limited = start(conn, "limited", 1)
    running = conn.execute("SELECT running FROM cronbox.queue_limit WHERE queue = 'narrow'").fetchone()[0]
    upstream = start(conn, "upstream", 1)

    def batch(other: int, t: float) -> None:
        plain.append(start(conn, "plain", t))
        assert [v for _, _, v in complete_batch(conn, [plain[-2], other], t + 1)] == ["finished", "finished"]

    batch(skipper, 2)
    assert stat(conn, "skipper") == (0, "succeeded", skipper)  # written at once, no fold needed
    batch(held, 4)
    assert [f["hold"] for f in futures(conn, "held")] == [None]
    batch(limited, 6)
    assert conn.execute("SELECT running FROM cronbox.queue_limit WHERE queue = 'narrow'").fetchone()[0] == running - 1
    # an after-job naming 'upstream': a batch with its run goes the general way
    conn.execute("SELECT cronbox.schedule('downstream', after => ARRAY['upstream'])")
    batch(upstream, 8)
    assert [f["origin"] for f in futures(conn, "downstream")] == ["dependency"]
    fold(conn)
    assert stat(conn, "plain") == (1, "dispatched", plain[-1])  # its newest run, in flight


def test_a_batch_with_a_run_not_in_flight_tells_it_apart(conn):
    """A batch with a run already final (a late report, kept beside history) or a duplicate id:
    the general way, each id with its verdict."""
    job(conn, "x", overlap="allow")
    job(conn, "y", overlap="allow")
    first = start(conn, "x", 0)
    second = start(conn, "y", 0)
    assert complete(conn, first, 1) == "succeeded"
    assert complete_batch(conn, [first, second], 2) \
        == [(first, "succeeded", "late"), (second, "succeeded", "finished")]
    assert conn.execute("SELECT count(*) FROM cronbox.run_late_report WHERE run_id = %s", (first,)).fetchone()[0] == 1
    third = start(conn, "x", 3)
    assert sorted(v for _, _, v in complete_batch(conn, [third, third], 4)) == ["finished", "finished"]
    assert [r["state"] for r in runs(conn, "x")] == ["succeeded", "succeeded"]


def test_a_run_ended_by_another_report_while_the_batch_waits_for_its_lock_is_a_late_report(fresh_dsn):
    """The batch reads its runs in flight, then waits for a job's lock held by a report of one of
    them; that report commits first: the batch ends the other run and records a late report for
    the one ended meanwhile (never a second history row, never not_found)."""
    with db.connect(fresh_dsn) as setup:
        for name in ("r1", "r2"):
            setup.execute("SELECT cronbox.schedule(%s, every => '1 hour', overlap => 'allow')", (name,))
            setup.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at, origin) SELECT job_id, bucket, "
                          "now() - interval '1 second', now() - interval '1 second', 'manual' "
                          "FROM cronbox.job WHERE name = %s", (name,))
        assert setup.execute("SELECT dispatched FROM cronbox.dispatch(10)").fetchone()[0] == 2
        r1, r2 = [setup.execute("SELECT run_id FROM cronbox.runs WHERE job = %s", (n,)).fetchone()[0]
                  for n in ("r1", "r2")]
    out: dict[str, Any] = {}
    with db.connect(fresh_dsn, autocommit=False) as first, db.connect(fresh_dsn) as watch:
        assert first.execute("SELECT cronbox.complete_run(%s)", (r1,)).fetchone()[0] == "succeeded"
        ready = threading.Event()

        def batch() -> None:
            with db.connect(fresh_dsn) as c:
                out["pid"] = c.info.backend_pid
                ready.set()
                out["rows"] = c.execute("SELECT run_id, state, verdict FROM cronbox.complete_runs(%s) ORDER BY run_id",
                                        ([r1, r2],)).fetchall()

        t = threading.Thread(target=batch)
        t.start()
        ready.wait(10)
        from .procs import wait_until
        wait_until(lambda: watch.execute("SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s",
                                         (out["pid"],)).fetchone()[0] is True, 10)
        first.commit()
        t.join(30)
        assert out["rows"] == sorted([(r1, "succeeded", "late"), (r2, "succeeded", "finished")])
        assert watch.execute("SELECT count(*) FROM cronbox.run WHERE run_id = ANY (%s)", ([r1, r2],)).fetchone()[0] == 2
        assert watch.execute("SELECT count(*) FROM cronbox.outbox WHERE outbox_id = ANY (%s)", ([r1, r2],)).fetchone()[0] == 0
        assert watch.execute("SELECT count(*) FROM cronbox.run_late_report WHERE run_id = %s", (r1,)).fetchone()[0] == 1


def test_a_batch_of_jobs_a_policy_reads_reads_each_job_row_once(conn):
    """A batch of successes of jobs a policy reads (overlap 'skip', the default): step 0b's
    check stops at its first job row and hands what it read and locked to the general way, which
    reads each job row once (step 3, under the locks): the jobs' names come from the runs in
    flight, not from the job rows. Each run ends with its statistics written at once."""
    from .plan_support import nodes, plans_of
    names = [f"sk{k}" for k in range(20)]
    for name in names:
        job(conn, name)  # overlap 'skip'
    for name in names:
        future(conn, name, 0)
    dispatch(conn, 0)
    ids = [active(conn, name)[-1] for name in names]
    conn.execute("ANALYZE cronbox.job")
    plans = plans_of(conn, "SELECT * FROM cronbox.complete_runs_at(%s, NULL, %s)", (ids, at(1)), analyze=True)
    # (not the foreign-key checks of job_stat's update: its rows were written in this test's
    # transaction, so PostgreSQL checks their key again; a report's own transaction does not)
    scans = [n for p in plans if not p["Query Text"].startswith("SELECT 1 FROM ONLY")
             for n in nodes(p["Plan"]) if n["Node Type"].endswith("Scan")]
    job_rows = sum(n.get("Actual Rows", 0) * n.get("Actual Loops", 1) for n in scans
                   if n.get("Relation Name") == "job")
    assert job_rows <= len(names) + 1, job_rows  # one per run, and step 0b's first
    # and the runs in flight are read by key twice, not three times: step 1 is not run again
    outbox_rows = sum(n.get("Actual Rows", 0) * n.get("Actual Loops", 1) for n in scans
                      if n.get("Relation Name") == "outbox")
    assert outbox_rows <= 2 * len(names), outbox_rows
    assert [r["state"] for name in names for r in runs(conn, name)] == ["succeeded"] * len(names)
    for name, rid in zip(names, ids):
        assert stat(conn, name) == (0, "succeeded", rid)
