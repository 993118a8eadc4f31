"""One report of one run (complete_run, fail_run, a batch of one): when ending the run asks for
nothing but its history row and its job's change row, cronbox.finish_runs ends it in two
statements (step 0); anything more goes the general way. Either way the run ends the same."""

from __future__ import annotations

from .runs_support import active, at, complete, dispatch, fail, fold, future, futures, job, runs

# the columns of a finished run that do not name the run or its job
SAME = ("state", "attempt", "origin", "fire_at", "due_at", "delivered_at", "started_at", "finished_at",
        "worker", "cancel_requested", "result", "error", "queue", "priority")


def start(conn, name: str, t: float) -> int:
    future(conn, name, t)
    dispatch(conn, t)
    return active(conn, name)[-1]


def change_rows(conn, after: int) -> list[tuple]:
    return conn.execute("SELECT job_ids, active, last_fire, last_run, last_state, ok, failures, crashes, missed, "
                        "success_at FROM cronbox.job_stat_change WHERE change_id > %s ORDER BY change_id",
                        (after,)).fetchall()


def last_change(conn) -> int:
    return conn.execute("SELECT coalesce(max(change_id), 0) FROM cronbox.job_stat_change").fetchone()[0]


def ended(conn, name: str) -> dict:
    [row] = [r for r in runs(conn, name)]
    return {k: row[k] for k in SAME}


def test_one_report_ends_a_run_as_a_batch_does(conn):
    """A success and a cancelled failure, one report each (step 0) and each in a batch with an
    unknown id beside it (the general path): the same history rows and change rows."""
    for name in ("one", "batch", "one_cancel", "batch_cancel"):
        job(conn, name, overlap="allow")
    ids = {name: start(conn, name, 0) for name in ("one", "batch", "one_cancel", "batch_cancel")}
    for rid in ids.values():
        conn.execute("SELECT cronbox.start_run_at(%s, 'w1', %s)", (rid, at(1)))
    for name in ("one_cancel", "batch_cancel"):  # running: the cancel is a request
        conn.execute("SELECT cronbox.cancel_at(%s, %s)", (ids[name], at(1)))
    long_error = "x" * 5000
    mark = last_change(conn)
    assert complete(conn, ids["one"], 2, {"rows": 3}) == "succeeded"
    assert fail(conn, ids["one_cancel"], 2, long_error) == "cancelled"
    one = change_rows(conn, mark)
    mark = last_change(conn)
    from psycopg.types.json import Jsonb
    assert conn.execute("SELECT state, verdict FROM cronbox.complete_runs_at(%s, %s, %s) WHERE run_id = %s",
                        ([ids["batch"], 1], [Jsonb({"rows": 3}), None], at(2), ids["batch"])).fetchone() \
        == ("succeeded", "finished")
    assert conn.execute("SELECT state FROM cronbox.fail_runs_at(%s, %s, true, %s) WHERE run_id = %s",
                        ([ids["batch_cancel"], 1], [long_error, "e"], at(2), ids["batch_cancel"])).fetchone()[0] \
        == "cancelled"
    batch = change_rows(conn, mark)

    assert ended(conn, "one") == ended(conn, "batch")
    assert ended(conn, "one")["result"] == {"rows": 3}
    assert ended(conn, "one_cancel") == ended(conn, "batch_cancel")
    assert ended(conn, "one_cancel")["error"].endswith("[truncated by cronbox: 5000 characters in all]")
    assert conn.execute("SELECT count(*) FROM cronbox.outbox WHERE kind = 'run'").fetchone()[0] == 0

    def meaning(rows: list[tuple], run_ids: list[int]) -> list[tuple]:
        # a row per call; the job and run ids differ between the two ways, the rest must not
        return [r[1:3] + r[4:] for r in rows] + [(len(r[0]), r[3] == [i]) for r, i in zip(rows, run_ids)]

    assert meaning(one, [ids["one"], ids["one_cancel"]]) == meaning(batch, [ids["batch"], ids["batch_cancel"]])
    assert [r[4] for r in one] == [["succeeded"], ["cancelled"]]
    fold(conn)
    assert conn.execute("SELECT s.active_runs, s.last_run_state FROM cronbox.job_stat s JOIN cronbox.job j "
                        "USING (job_id) WHERE j.name = 'one'").fetchone() == (0, "succeeded")


def test_one_report_that_frees_a_held_fire_goes_the_general_way(conn):
    """A job no policy reads, with a backfilled fire held by the backfill's own overlap policy:
    its run's one report releases the fire, as every end does."""
    job(conn, "bf", overlap="allow")
    first = start(conn, "bf", 0)
    conn.execute(
        "INSERT INTO cronbox.job_future (job_id, fire_at, due_at, origin, overlap, queue, bucket) "
        "SELECT job_id, %s, %s, 'backfill', 'buffer_one', queue, bucket FROM cronbox.job WHERE name = 'bf'",
        (at(-500), at(1)))
    dispatch(conn, 1)
    assert [f["hold"] for f in futures(conn, "bf")] == ["overlap"]
    assert complete(conn, first, 2) == "succeeded"
    assert [f["hold"] for f in futures(conn, "bf")] == [None]
    assert dispatch(conn, 3)["dispatched"] == 1


def test_one_report_of_a_run_not_in_flight_is_late_or_unknown(conn):
    job(conn, "late", overlap="allow")
    rid = start(conn, "late", 0)
    assert complete(conn, rid, 1) == "succeeded"
    assert fail(conn, rid, 2, "again") == "succeeded"  # late: kept beside history, nothing changed
    assert conn.execute("SELECT report ->> 'report' FROM cronbox.run_late_report WHERE run_id = %s",
                        (rid,)).fetchone()[0] == "failed"
    assert conn.execute("SELECT verdict FROM cronbox.complete_runs_at(%s, NULL, %s)", ([rid + 1], at(3))).fetchone()[0] \
        == "not_found"


def test_a_change_row_carries_the_bucket_of_the_statement_that_wrote_it(conn):
    """cronbox.job_stat_change.bucket (migrations 0470, 0474): every change row carries its jobs'
    bucket, with the runs' bucket given (finish_runs' p_bucket, as the per-bucket callers pass
    it) or not (plain PostgreSQL's calls), and from dispatch's write (plain PostgreSQL's one
    bucket, 0)."""
    for name in ("plain", "given"):
        job(conn, name, overlap="allow")
    mark = last_change(conn)
    ids = {name: start(conn, name, 0) for name in ("plain", "given")}
    assert [r[0] for r in conn.execute("SELECT bucket FROM cronbox.job_stat_change WHERE change_id > %s",
                                       (mark,))] == [0, 0]  # each dispatch's
    mark = last_change(conn)
    assert complete(conn, ids["plain"], 2) == "succeeded"
    assert conn.execute("SELECT state FROM cronbox.finish_runs(%s, 'succeeded', p_now => %s, p_bucket => 0)",
                        ([ids["given"]], at(2))).fetchone()[0] == "succeeded"
    got = conn.execute("SELECT bucket FROM cronbox.job_stat_change WHERE change_id > %s ORDER BY change_id",
                       (mark,)).fetchall()
    assert got == [(0,), (0,)], got
