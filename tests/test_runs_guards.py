"""Guards: the hot statements use their partial indexes and never scan history; two pollers
and two pull-mode workers on one queue claim disjoint runs and dispatch no fire twice."""

from __future__ import annotations

import threading
from collections import Counter

import psycopg
import pytest
from psycopg.types.json import Jsonb

from cronbox import db

from .plan_support import nodes, plans_of
from .procs import Proc, wait_until
from .runs_support import ADD_JOB_ROWS, T0, at, dispatch, future, job


def scans(plans: list[dict]) -> list[tuple[str, str, str | None]]:
    """(node type, relation, index) of every scan in the plans."""
    out = []
    for p in plans:
        for n in nodes(p["Plan"]):
            if "Relation Name" in n and n["Node Type"] != "ModifyTable":
                if n["Node Type"] == "Bitmap Heap Scan":
                    # by key all the same when every bitmap underneath is an index scan:
                    # report each of those indexes as an index scan of the relation
                    bitmaps = [c for c in nodes(n) if c["Node Type"] == "Bitmap Index Scan"]
                    out += [("Index Scan", n["Relation Name"], c["Index Name"]) for c in bitmaps]
                    if not bitmaps:
                        out.append((n["Node Type"], n["Relation Name"], None))
                    continue
                out.append((n["Node Type"], n["Relation Name"], n.get("Index Name")))
    return out


def assert_no_history_scan(seen: list[tuple[str, str, str | None]]) -> None:
    """cronbox.run is only reached by run_id (primary key) or the lease index."""
    for node, rel, idx in seen:
        if rel.startswith("run") or rel in ("job_future", "outbox"):
            assert node in ("Index Scan", "Index Only Scan"), (node, rel, idx)
        if rel.startswith("run_"):
            assert idx in (f"{rel}_pkey", f"{rel}_lease_until_idx"), (rel, idx)  # never a history index


def big_history(conn: psycopg.Connection) -> None:
    """Enough finished history and not-yet-due futures that a scan would show."""
    job(conn, "hist", overlap="allow")
    # finished runs in every partition (yesterday .. a week ahead), as a running system has
    conn.execute(
        "INSERT INTO cronbox.run (run_id, job_id, bucket, job_name, queue, fire_at, state, finished_at) "
        "SELECT cronbox.run_id_at(date_trunc('day', now()) + make_interval(days => d)) + g, "
        "       j.job_id, j.bucket, j.name, j.queue, %s, 'succeeded', %s "
        "FROM cronbox.job j, generate_series(-1, 7) d, generate_series(1, 3000) g "
        "WHERE j.name = 'hist'", (T0, T0))
    conn.execute(
        "INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) "
        "SELECT j.job_id, j.bucket, %s + make_interval(secs => g), %s + make_interval(secs => g) "
        "FROM cronbox.job j, generate_series(1, 20000) g WHERE j.name = 'hist'", (at(3600), at(3600)))
    conn.execute("ANALYZE cronbox.run")
    conn.execute("ANALYZE cronbox.job_future")
    conn.execute("ANALYZE cronbox.outbox")


def test_dispatch_uses_the_lane_index_and_never_scans_history(conn):
    big_history(conn)
    job(conn, "hot", overlap="cancel_other")
    for t in range(5):
        future(conn, "hot", t)
    plans = plans_of(conn, "SELECT * FROM cronbox.dispatch_at(100, p_now => %s)", (at(10),))
    seen = scans(plans)
    # each queue's walk and the next due time: job_future_lane_idx, the one index of ready futures
    assert ("job_future", "job_future_lane_idx") in {(rel, idx) for _, rel, idx in seen}
    assert_no_history_scan(seen)
    assert conn.execute("SELECT count(*) FROM cronbox.runs WHERE state = 'dispatched'").fetchone()[0] == 1


def test_ready_futures_have_one_index_the_lane_index(conn):
    """A future stored writes one entry in the index of ready futures: the lane index serves
    dispatch, the next due time, the count of fires ahead and cronbox.queues."""
    ready = [r[0] for r in conn.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = 'cronbox' AND tablename = 'job_future' "
        "AND indexdef LIKE '%WHERE (hold IS NULL)%' ORDER BY 1")]
    assert ready == ["job_future_lane_idx"]


def test_the_reads_across_queues_walk_the_lane_index(conn):
    big_history(conn)
    job(conn, "hot", overlap="allow")
    for t in range(5):
        future(conn, "hot", t)
    conn.execute("ANALYZE cronbox.job_future")
    for sql in ("SELECT cronbox.next_due()", "SELECT * FROM cronbox.due_ahead('1 hour', 1000)"):
        seen = scans(plans_of(conn, sql))
        assert {idx for _, rel, idx in seen if rel == "job_future"} == {"job_future_lane_idx"}, (sql, seen)
        assert all(node in ("Index Scan", "Index Only Scan") for node, rel, _ in seen if rel == "job_future"), seen


def test_claim_runs_uses_the_pull_index(conn):
    big_history(conn)
    job(conn, "pulled", queue="pg", overlap="allow")
    job(conn, "pushed", queue="http", overlap="allow")
    for t in range(300):
        future(conn, "pushed", t)
    for t in range(3):
        future(conn, "pulled", t)
    dispatch(conn, 400)
    conn.execute("ANALYZE cronbox.outbox")
    conn.execute("ANALYZE cronbox.run")
    plans = plans_of(conn, "SELECT * FROM cronbox.claim_runs_at('pg', 'w', 10, p_now => %s)", (at(401),))
    seen = scans(plans)
    assert ("outbox", "outbox_queue_idx") in {(rel, idx) for _, rel, idx in seen}
    assert_no_history_scan(seen)
    assert conn.execute("SELECT count(*) FROM cronbox.runs WHERE state = 'running'").fetchone()[0] == 3


def test_a_pull_claim_walks_none_of_the_queue_s_runs_in_flight(conn):
    """A claimed run leaves the walk of outbox_queue_idx (it is never claimed again): the next
    claim of the queue starts at its first claimable row instead of filtering the runs in
    flight out one by one."""
    job(conn, "pulled", queue="pg", overlap="allow")
    for t in range(60):
        future(conn, "pulled", t)
    dispatch(conn, 100)
    assert len(conn.execute("SELECT run_id FROM cronbox.claim_runs_at('pg', 'w1', 50, p_now => %s)",
                            (at(101),)).fetchall()) == 50
    plans = plans_of(conn, "SELECT * FROM cronbox.claim_runs_at('pg', 'w2', 50, p_now => %s)", (at(101),),
                     analyze=True)
    walks = [n for p in plans for n in nodes(p["Plan"]) if n.get("Index Name") == "outbox_queue_idx"]
    assert walks and sum(n.get("Rows Removed by Filter", 0) for n in walks) == 0, walks
    assert sum(n["Actual Rows"] for n in walks) == 10
    assert conn.execute("SELECT count(*) FROM cronbox.runs WHERE state = 'running'").fetchone()[0] == 60


def test_a_relay_claim_walks_none_of_the_queue_s_runs_its_workers_answered_202(conn):
    """A run whose delivery was acked without its outcome (the worker answered 202 and reports
    later) leaves the walk of outbox_queue_idx as a pulled one does: the next claim of the
    queue starts at its first claimable row."""
    job(conn, "pushed", queue="http", overlap="allow")
    for t in range(60):
        future(conn, "pushed", t)
    dispatch(conn, 100)
    ids = [r[0] for r in conn.execute("SELECT outbox_id FROM cronbox.claim_outbox_at('r1', 50, p_now => %s)",
                                      (at(101),))]
    assert len(ids) == 50
    assert conn.execute("SELECT cronbox.ack_outbox_at('r1', %s, p_now => %s)", (ids, at(101))).fetchone()[0] == 50
    plans = plans_of(conn, "SELECT * FROM cronbox.claim_outbox_at('r2', 50, p_now => %s)", (at(101),), analyze=True)
    walks = [n for p in plans for n in nodes(p["Plan"]) if n.get("Index Name") == "outbox_queue_idx"]
    assert walks and sum(n.get("Rows Removed by Filter", 0) for n in walks) == 0, walks
    assert conn.execute("SELECT count(*) FROM cronbox.runs WHERE state = 'delivered'").fetchone()[0] == 50
    assert conn.execute("SELECT count(*) FROM cronbox.outbox WHERE lease_owner = 'r2'").fetchone()[0] == 10


def test_reports_and_the_reaper_reach_runs_by_key_or_unfinished_index_only(conn):
    big_history(conn)
    job(conn, "rep", overlap="allow")
    for t in range(3):
        future(conn, "rep", t)
    dispatch(conn, 10)
    conn.execute("ANALYZE cronbox.run")
    ids = [r[0] for r in conn.execute("SELECT run_id FROM cronbox.runs WHERE state = 'dispatched'")]
    plans = plans_of(conn, "SELECT * FROM cronbox.complete_runs_at(%s, NULL, %s)", (ids, at(11)))
    assert_no_history_scan(scans(plans))
    plans = plans_of(conn, "SELECT cronbox.reap_lost_at(100, p_now => %s)", (at(12),))
    seen = scans(plans)
    for node, rel, idx in seen:  # the reaper reads only the partial indexes of unfinished runs
        if rel.startswith("run_"):
            assert node in ("Index Scan", "Index Only Scan") and idx.endswith(("_lease_until_idx", "_job_id_idx")), (rel, idx)
        if rel == "outbox":  # by the runs' lease, never a walk of the messages waiting
            assert idx in ("outbox_run_lease_until_idx", "outbox_pkey"), (node, rel, idx)


# --- two pollers, two pull-mode workers --------------------------------------------------


def test_two_pollers_and_two_pull_workers_claim_disjoint_runs_and_dispatch_nothing_twice(fresh_dsn, tmp_path):
    with db.connect(fresh_dsn) as conn:
        conn.execute("SELECT cronbox.schedule('j' || g, every => '1 second', queue => 'pg', overlap => 'allow') "
                     "FROM generate_series(1, 150) g")
    claims: dict[str, list[int]] = {"wa": [], "wb": []}
    stop = threading.Event()
    errors: list[BaseException] = []

    def worker(name: str) -> None:
        try:
            with db.connect(fresh_dsn) as conn:
                while True:
                    rows = conn.execute("SELECT run_id FROM cronbox.claim_runs('pg', %s, 20)", (name,)).fetchall()
                    ids = [r[0] for r in rows]
                    claims[name] += ids
                    if ids:
                        conn.execute("SELECT count(*) FROM cronbox.complete_runs(%s)", (ids,))
                    elif stop.is_set() and conn.execute(
                            "SELECT NOT EXISTS (SELECT 1 FROM cronbox.outbox WHERE kind = 'run')").fetchone()[0]:
                        # runs the pollers dispatched ahead (CRONBOX_DISPATCH_LEAD) before they
                        # stopped come due within the lead: those are claimed too
                        return
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in claims]
    env = {"CRONBOX_DISPATCH_BATCH": "40", "CRONBOX_LOG_LEVEL": "debug"}
    with Proc("poller", fresh_dsn, tmp_path, **env) as p1, Proc("poller", fresh_dsn, tmp_path, **env) as p2:
        for t in threads:
            t.start()
        wait_until(lambda: len(claims["wa"]) + len(claims["wb"]) >= 600, timeout=60, what="600 claimed runs")
        assert p1.terminate() == 0, p1.output
        assert p2.terminate() == 0, p2.output
        stop.set()
        for t in threads:
            t.join(30)
    assert not errors, errors
    a, b = set(claims["wa"]), set(claims["wb"])
    assert a and b and not a & b
    assert len(a) == len(claims["wa"]) and len(b) == len(claims["wb"])  # no run claimed twice
    with db.connect(fresh_dsn) as conn:
        fires = conn.execute("SELECT job_id, fire_at, attempt FROM cronbox.runs WHERE state <> 'missed'").fetchall()
        dispatched = {r[0] for r in conn.execute(
            "SELECT run_id FROM cronbox.runs WHERE state NOT IN ('missed', 'skipped')")}
        left = conn.execute("SELECT count(*) FROM cronbox.outbox WHERE kind = 'run'").fetchone()[0]
    assert [f for f, n in Counter(fires).items() if n > 1] == []  # no fire dispatched twice
    assert dispatched == a | b and left == 0  # every dispatched run was claimed exactly once


def job_future_rows_read(conn, sql: str, params=()) -> int:
    return sum(n["Actual Rows"] * n["Actual Loops"] + n.get("Rows Removed by Filter", 0)
               for p in plans_of(conn, sql, params, analyze=True) for n in nodes(p["Plan"])
               if n.get("Relation Name") == "job_future" and "Scan" in n["Node Type"])


def test_a_dispatch_planned_while_no_future_was_due_walks_the_index_when_a_burst_comes(conn):
    # The poller's plans are kept for the session once PostgreSQL settles on a generic one,
    # made while job_future was nearly empty (statistics after VACUUM say so): a million
    # futures due on one minute boundary must still be read through the ready index.
    job(conn, "burst", overlap="allow")
    look_empty(conn, "job_future")
    for t in range(8):  # past PostgreSQL's five custom plans
        future(conn, "burst", t)
        dispatch(conn, t)
    conn.execute(
        "INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) "
        "SELECT j.job_id, j.bucket, %s + make_interval(secs => g), %s FROM cronbox.job j, generate_series(1, 20000) g "
        "WHERE j.name = 'burst'", (at(100), at(100)))
    assert job_future_rows_read(conn, "SELECT * FROM cronbox.dispatch_at(100, p_now => %s)", (at(100),)) < 1000
    assert conn.execute("SELECT count(*) FROM cronbox.job_future").fetchone()[0] == 19900


class RowsRead(dict):
    """Rows read per table; its repr adds the plans of the statements that read 1,000 rows or
    more from one table, so that a failure shows the plan that did it."""

    heavy: list[str]

    def __repr__(self) -> str:
        return dict.__repr__(self) + "".join("\n" + h for h in self.heavy)


def plan_outline(plan: dict, depth: int = 0) -> str:
    """A plan tree, a line per node: type, relation or index, rows returned and filtered out."""
    line = "  " * depth + " ".join(str(x) for x in (
        plan["Node Type"], plan.get("Index Name") or plan.get("Relation Name") or "",
        f"rows={plan.get('Actual Rows')}x{plan.get('Actual Loops')}",
        f"removed={plan.get('Rows Removed by Filter', 0)}") if x)
    return "\n".join([line] + [plan_outline(c, depth + 1) for c in plan.get("Plans", [])])


def rows_read_per_table(conn, sql: str, params=()) -> RowsRead:
    """Rows read (returned or filtered out) per table by the scans of every statement `sql` runs."""
    read: Counter[str] = Counter()
    heavy: list[str] = []
    for p in plans_of(conn, sql, params, analyze=True):
        mine: Counter[str] = Counter()
        for n in nodes(p["Plan"]):
            if n.get("Relation Name") and "Scan" in n["Node Type"]:
                mine[n["Relation Name"]] += n["Actual Rows"] * n["Actual Loops"] + n.get("Rows Removed by Filter", 0)
        read.update(mine)
        if any(v >= 1000 for v in mine.values()):
            heavy.append(f"{p.get('Query Text', '')[:300]}\n{plan_outline(p['Plan'])}")
    result = RowsRead(read)
    result.heavy = heavy
    return result


def look_empty(conn, table: str) -> None:
    """Statistics saying `cronbox.<table>` is empty (no live row over its pages), as VACUUM
    leaves a drained table, whatever it holds: the plans made next are made for that."""
    conn.execute("UPDATE pg_class SET reltuples = 0, relpages = 1 WHERE oid = %s::regclass", (f"cronbox.{table}",))


def held_jobs(conn, prefix: str, hold: str, paused: bool = False) -> list[int]:
    """20,000 jobs `<prefix><i>`, each with one future held by `hold` whose backstop
    (hold_until) is at(0) + job_id seconds; their ids in order."""
    conn.execute(
        "INSERT INTO cronbox.job (name, kind, every, anchor, paused) "
        "SELECT %s || i, 'every', interval '1 hour', %s, %s FROM generate_series(1, 20000) i",
        (prefix, at(0), paused))
    conn.execute(ADD_JOB_ROWS)
    conn.execute(
        "INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at, hold, held_since, hold_until) "
        "SELECT job_id, bucket, %s, %s, %s, %s, %s + make_interval(secs => job_id) FROM cronbox.job "
        "WHERE name LIKE %s", (at(0), at(0), hold, at(0), at(0), prefix + "%"))
    return [r[0] for r in conn.execute("SELECT job_id FROM cronbox.job WHERE name LIKE %s ORDER BY job_id",
                                       (prefix + "%",))]


# A worker's reports (success; failure with a retry to schedule, on_error pause) and the relay's
# ack with the worker's answers, 100 runs each: all of them go through cronbox.finish_runs.
FINISHES_OF_100 = [
    "SELECT count(*) FROM cronbox.complete_runs(%(ids)s)",
    "SELECT count(*) FROM cronbox.fail_runs(%(ids)s, array_fill('boom'::text, ARRAY[100]))",
    "SELECT cronbox.ack_outbox_at('r1', %(outbox)s, %(answers)s, p_now => now())",
]


@pytest.mark.parametrize("finish_sql", FINISHES_OF_100)
@pytest.mark.parametrize("looked_empty", ["job", "job_stat"])
def test_a_finish_planned_while_the_jobs_looked_empty_reads_only_the_jobs_it_finishes(conn, finish_sql, looked_empty):
    # finish_runs keeps one generic plan per session. Planned while the statistics said the job
    # tables were empty (a fresh install, then a script creates 20,000 schedules and their runs
    # come back before autoanalyze), a join to the job table or to job_stat became a walk of
    # the whole table per call (60,000 job rows read to finish 100 runs): each run's job must
    # be reached by its key.
    conn.execute(
        "INSERT INTO cronbox.job (name, kind, at, finished_at, overlap, max_attempts, on_error) "
        "SELECT 'many-' || i, 'at', now(), now(), 'allow', 2, 'pause' FROM generate_series(1, 20000) i")
    conn.execute(ADD_JOB_ROWS)
    conn.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) SELECT job_id, bucket, at, now() FROM cronbox.job")
    for _ in range(3):
        conn.execute("SELECT * FROM cronbox.dispatch_at(1000, p_now => now())")
    claimed = conn.execute("SELECT outbox_id, run_id FROM cronbox.claim_outbox_at('r1', 3000, p_now => now())").fetchall()
    look_empty(conn, looked_empty)

    def batch(k: int) -> dict:
        rows = claimed[100 * k:100 * (k + 1)]
        return {"ids": [r[1] for r in rows], "outbox": [r[0] for r in rows],
                "answers": Jsonb([{"outbox_id": r[0], "state": "failed", "error": "boom"} for r in rows])}

    for k in range(8):  # past PostgreSQL's five custom plans
        conn.execute(finish_sql, batch(k))
    read = rows_read_per_table(conn, finish_sql, batch(8))
    assert read["job"] < 1000 and read["job_stat"] < 1000, read
    if "complete_runs" in finish_sql:
        assert conn.execute("SELECT count(*) FROM cronbox.runs WHERE state = 'succeeded'").fetchone()[0] == 900
    else:  # a retry each: the second attempt is a future due later
        assert conn.execute("SELECT count(*) FROM cronbox.job_future WHERE origin = 'retry'").fetchone()[0] == 900



@pytest.mark.parametrize("looked_empty", ["job", "job_stat"])
def test_after_jobs_of_a_finish_planned_while_the_jobs_looked_empty_are_found_by_key(conn, looked_empty):
    # The successes of 100 upstreams, each listed by an after-job (after => ARRAY[...]), among
    # 20,000 jobs whose statistics looked empty: the after-jobs and their upstreams' last
    # successes are reached by name and key, and each after-job fires once.
    conn.execute(
        "INSERT INTO cronbox.job (name, kind, at, finished_at, overlap) "
        "SELECT 'up-' || i, 'at', now(), now(), 'allow' FROM generate_series(1, 20000) i")
    conn.execute("INSERT INTO cronbox.job (name, kind, after) "
                 "SELECT 'down-' || i, 'after', ARRAY['up-' || i] FROM generate_series(1, 900) i")
    conn.execute(ADD_JOB_ROWS)
    conn.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) "
                 "SELECT job_id, bucket, at, now() FROM cronbox.job WHERE name LIKE 'up-%' ORDER BY job_id LIMIT 900")
    conn.execute("SELECT * FROM cronbox.dispatch_at(1000, p_now => now())")
    runs = [r[0] for r in conn.execute("SELECT run_id FROM cronbox.runs ORDER BY run_id")]
    look_empty(conn, looked_empty)
    sql = "SELECT count(*) FROM cronbox.complete_runs(%s)"
    for k in range(8):  # past PostgreSQL's five custom plans
        conn.execute(sql, (runs[100 * k:100 * (k + 1)],))
    read = rows_read_per_table(conn, sql, (runs[800:900],))
    assert read["job"] < 2000 and read["job_stat"] < 2000, read
    assert conn.execute("SELECT count(*) FROM cronbox.job_future WHERE origin = 'dependency'").fetchone()[0] == 900

@pytest.mark.parametrize("looked_empty", ["job", "job_stat", "job_fire"])
def test_a_saturation_pass_planned_while_the_jobs_looked_empty_reads_only_its_jobs(conn, looked_empty):
    # The poller's store_fires, planned while the statistics said the job tables were empty
    # (a million schedules created by a script, before autoanalyze): its joins to the job table
    # read 2,000,000 job rows to store 100 jobs' fires (the horizon would fall behind for every
    # schedule). Each job must be reached by its key.
    conn.execute("INSERT INTO cronbox.job (name, kind, every, anchor) "
                 "SELECT 'every-' || i, 'every', interval '1 minute', %s FROM generate_series(1, 20000) i",
                 (T0,))
    conn.execute(ADD_JOB_ROWS)
    conn.execute("UPDATE cronbox.job_fire SET frontier = %s", (T0,))
    ids = [r[0] for r in conn.execute("SELECT job_id FROM cronbox.job WHERE name LIKE 'every-%' ORDER BY job_id")]
    look_empty(conn, looked_empty)

    def store(k: int) -> str:
        jobs, fire, nxt = ids[100 * k:100 * (k + 1)], [at(60)] * 100, [at(120)] * 100
        none = [None] * 100
        return ("SELECT futures FROM cronbox.store_fires_at(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, p_now => %s)",
                (jobs, fire, [False] * 100, jobs, fire, nxt, [False] * 100, none, none, none, none, at(0)))

    for k in range(8):  # past PostgreSQL's five custom plans
        conn.execute(*store(k))
    read = rows_read_per_table(conn, *store(8))
    assert read.get("job", 0) < 1000 and read.get("job_stat", 0) < 1000 and read.get("job_fire", 0) < 1000, read
    assert conn.execute("SELECT count(*) FROM cronbox.job_future").fetchone()[0] == 900
    assert conn.execute("SELECT count(*) FROM cronbox.job_fire WHERE next_fire = %s", (at(120),)).fetchone()[0] == 900


# The poller's dispatch of due fires and early dispatch of fires due within the lead, 100 each.
DISPATCHES_OF_100 = [
    ("SELECT dispatched FROM cronbox.dispatch_at(100, p_now => %s)", 0),
    ("SELECT dispatched FROM cronbox.dispatch_ahead_at(100, '10 seconds', p_now => %s)", 5),
]


def many_due_futures(conn, due_in: int) -> None:
    """20,000 jobs `many-<i>` (overlap allow), each with one ready future due at at(due_in)."""
    conn.execute(
        "INSERT INTO cronbox.job (name, kind, every, anchor, overlap) "
        "SELECT 'many-' || i, 'every', interval '1 hour', %s, 'allow' FROM generate_series(1, 20000) i",
        (at(0),))
    conn.execute(ADD_JOB_ROWS)
    conn.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) "
                 "SELECT job_id, bucket, %s, %s FROM cronbox.job WHERE name LIKE 'many-%%'", (at(due_in), at(due_in)))


@pytest.mark.parametrize("dispatch_sql, due_in", DISPATCHES_OF_100)
@pytest.mark.parametrize("looked_empty", ["job", "job_stat", "job_future"])
def test_a_dispatch_planned_while_the_jobs_looked_empty_locks_only_its_jobs(conn, dispatch_sql, due_in, looked_empty):
    # The job locks (job_stat rows, FOR NO KEY UPDATE SKIP LOCKED) of the futures picked: as a
    # semi-join planned while job_stat looked empty, every call walked all 20,000 rows of it.
    # And the futures: walked in due order up to the batch, never gathered whole by a bitmap
    # scan and sorted (planned while job_future looked empty: every due future read per call).
    many_due_futures(conn, due_in)
    # column statistics of a full table, then the row count of an empty one: a drained table after VACUUM
    conn.execute("ANALYZE cronbox.job, cronbox.job_stat, cronbox.job_future")
    look_empty(conn, looked_empty)
    for _ in range(8):  # past PostgreSQL's five custom plans
        assert conn.execute(dispatch_sql, (at(0),)).fetchone()[0] == 100
    read = rows_read_per_table(conn, dispatch_sql, (at(0),))
    assert read["job"] < 1000 and read["job_stat"] < 1000 and read["job_future"] < 1000, read
    assert conn.execute("SELECT count(*) FROM cronbox.runs").fetchone()[0] == 900


@pytest.mark.parametrize("looked_empty", [None, "job", "job_future"])
def test_finished_jobs_are_looked_up_by_key_not_by_walking_every_jobs_futures(conn, looked_empty):
    # cronbox.job_finishes (the change log's finishes, read from the jobs' state; logged by
    # record_finished before schedule() reopens or unschedule() deletes a job) looks for a
    # scheduled future of each finished job, as NOT EXISTS: planned as a merge anti-join, it would walk every job's
    # futures in job order up to the batch's last job (20,000 other jobs' futures read to find
    # that 1,000 jobs have none). Each job's futures are reached by its key, whatever the
    # statistics say (bench.finished_lookup: the same at a million schedules).
    many_due_futures(conn, 3600)
    conn.execute(
        "INSERT INTO cronbox.job (name, kind, at, finished_at, overlap) "
        "SELECT 'done-' || i, 'at', %s, %s, 'allow' FROM generate_series(1, 1000) i", (at(0), at(0)))
    conn.execute(ADD_JOB_ROWS)
    done = [r[0] for r in conn.execute("SELECT job_id FROM cronbox.job WHERE name LIKE 'done-%' ORDER BY job_id")]
    conn.execute("ANALYZE cronbox.job, cronbox.job_stat, cronbox.job_future")
    if looked_empty:
        look_empty(conn, looked_empty)
    sql = "SELECT cronbox.record_finished(%s::bigint[])"
    assert conn.execute(sql, (done,)).fetchone()[0] == 1000   # each finish logged once
    for _ in range(8):  # past PostgreSQL's five custom plans
        assert conn.execute(sql, (done,)).fetchone()[0] == 0
    read = rows_read_per_table(conn, sql, (done,))
    assert read["job_future"] < 1000, read


@pytest.mark.parametrize("by", ["job", "job_id"])
def test_one_jobs_change_log_reads_that_jobs_rows_whatever_the_finished_jobs_and_their_rows(conn, by):
    # cronbox.schedule_changes shows a finished job's 'finished' from its state unless a row
    # logs it: filtered by one job (the web console by job_id, psql by name), both the finished
    # jobs and the change log's finished rows are reached by that job's key, not read whole.
    conn.execute(
        "INSERT INTO cronbox.job (name, kind, at, finished_at, overlap) "
        "SELECT 'done-' || i, 'at', %s, %s, 'allow' FROM generate_series(1, 5000) i", (at(0), at(0)))
    conn.execute(ADD_JOB_ROWS)
    conn.execute("INSERT INTO cronbox.job_change (job_id, job_name, action, reason, changed_at) "
                 "SELECT job_id, name, 'finished', 'logged', %s FROM cronbox.job WHERE name LIKE 'done-%%'", (at(1),))
    conn.execute("INSERT INTO cronbox.job_change (job_id, job_name, action, reason, changed_at) "
                 "SELECT job_id + 10000000, 'gone-' || name, 'finished', 'logged', %s FROM cronbox.job WHERE name LIKE 'done-%%'",
                 (at(1),))
    conn.execute("UPDATE cronbox.job SET finished_at = %s WHERE name = 'done-7'", (at(2),))  # finished again
    conn.execute("ANALYZE cronbox.job, cronbox.job_fire, cronbox.job_future, cronbox.job_change")
    key = "done-7" if by == "job" else conn.execute("SELECT job_id FROM cronbox.job WHERE name = 'done-7'").fetchone()[0]
    sql = f"SELECT action, reason, changed_at FROM cronbox.schedule_changes WHERE {by} = %s ORDER BY changed_at"
    assert conn.execute(sql, (key,)).fetchall() == [("finished", "logged", at(1)), ("finished", "one-off fire handled", at(2))]
    read = rows_read_per_table(conn, sql, (key,))
    assert all(read.get(t, 0) < 100 for t in ("job", "job_fire", "job_change")), (read, read.heavy)


@pytest.mark.parametrize("dispatch_sql, due_in", DISPATCHES_OF_100)
def test_a_dispatch_walks_its_batch_in_due_order_whatever_join_the_planner_prefers(conn, dispatch_sql, due_in):
    # A dependency check written as NOT EXISTS in the walk's WHERE became an anti-join; when the
    # planner preferred a merge anti-join (statistics of a table a rolled-back test filled), early
    # dispatch walked every future in job order and sorted them: 19,400 rows read for 100.
    # Merge joins are made the only kind here, so any join left in the walk shows.
    many_due_futures(conn, due_in)
    conn.execute("ANALYZE cronbox.job, cronbox.job_stat, cronbox.job_future")
    look_empty(conn, "job_future")
    conn.execute("SET LOCAL enable_nestloop = off")
    conn.execute("SET LOCAL enable_hashjoin = off")
    for _ in range(8):  # past PostgreSQL's five custom plans
        assert conn.execute(dispatch_sql, (at(0),)).fetchone()[0] == 100
    read = rows_read_per_table(conn, dispatch_sql, (at(0),))
    assert read["job"] < 1000 and read["job_stat"] < 1000 and read["job_future"] < 1000, read


@pytest.mark.parametrize("looked_empty", ["job_future", None])
def test_a_dispatch_beside_a_burst_in_another_queue_reads_the_burst_only_as_far_as_its_share(conn, looked_empty):
    # 20,000 fires due in the default queue, and each call a fire of another queue comes due:
    # each queue's walk stops at its share (the second walk, giving the canary's leftover to
    # the burst, reads the first one's rows again), whatever the statistics said.
    many_due_futures(conn, 0)
    job(conn, "canary", queue="canary", overlap="allow")
    conn.execute("ANALYZE cronbox.job, cronbox.job_stat, cronbox.job_future")
    if looked_empty:
        look_empty(conn, looked_empty)
    sql = "SELECT dispatched FROM cronbox.dispatch_at(100, p_now => %s)"
    for k in range(9):  # past PostgreSQL's five custom plans
        future(conn, "canary", k + 1)
        if k < 8:
            assert conn.execute(sql, (at(k + 1),)).fetchone()[0] == 100
    read = rows_read_per_table(conn, sql, (at(9),))
    assert read["job"] < 1000 and read["job_stat"] < 1000 and read["job_future"] < 1000, read
    assert conn.execute("SELECT count(*) FROM cronbox.runs WHERE job = 'canary'").fetchone()[0] == 9
    assert conn.execute("SELECT count(*) FROM cronbox.runs").fetchone()[0] == 900


def test_released_holds_are_reached_by_key_while_job_future_looked_empty(conn):
    # 20,000 held futures, 10 of them past their backstop: the release updates those 10 by key,
    # never through the partial index of every held future (its predicate, `hold IS NOT NULL`,
    # was beside the key: planned while job_future looked empty, it walked all 20,000).
    first = held_jobs(conn, "held-", "overlap")[0]
    look_empty(conn, "job_future")
    sql = "SELECT cronbox.release_holds_at(10, p_now => %s + make_interval(secs => %s))"
    for k in range(8):  # past PostgreSQL's five custom plans
        assert conn.execute(sql, (at(0), first + 10 * k + 9)).fetchone()[0] == 10
    assert rows_read_per_table(conn, sql, (at(0), first + 89))["job_future"] < 1000


def test_paused_jobs_due_to_resume_are_locked_by_key_while_job_stat_looked_empty(conn):
    conn.execute(
        "INSERT INTO cronbox.job (name, kind, every, anchor, paused, paused_until) "
        "SELECT 'paused-' || i, 'every', interval '1 hour', %s, true, %s + make_interval(secs => i) "
        "FROM generate_series(1, 20000) i", (at(0), at(0)))
    conn.execute(ADD_JOB_ROWS)
    conn.execute("UPDATE cronbox.job_fire SET frontier = %s", (at(0),))
    look_empty(conn, "job_stat")
    sql = "SELECT cronbox.resume_paused_at(10, p_now => %s)"
    for k in range(8):  # past PostgreSQL's five custom plans
        assert conn.execute(sql, (at(10 * k + 10),)).fetchone()[0] == 10
    assert rows_read_per_table(conn, sql, (at(90),))["job_stat"] < 1000
    assert conn.execute("SELECT count(*) FROM cronbox.job WHERE name LIKE 'paused-%' AND NOT paused").fetchone()[0] == 90


def test_superseded_runs_are_withdrawn_from_the_outbox_in_one_walk_while_it_looked_empty(conn):
    # cancel_other: a newer fire supersedes runs still waiting in the outbox, whose rows are
    # withdrawn. The outbox has no run_id index (the hot path would pay for it), so the rows are
    # found in one walk of their queue; as a semi-join planned while the outbox looked empty,
    # the walk was repeated per row (16,000,000 rows read for 10 runs in a 4,000-row outbox).
    conn.execute(
        "INSERT INTO cronbox.job (name, kind, every, anchor, overlap) "
        "SELECT 'newest-' || i, 'every', interval '1 hour', %s, 'cancel_other' FROM generate_series(1, 2000) i",
        (at(0),))
    conn.execute(ADD_JOB_ROWS)
    conn.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at) "
                 "SELECT job_id, bucket, %s, %s FROM cronbox.job WHERE name LIKE 'newest-%%'", (at(0), at(0)))
    assert conn.execute("SELECT dispatched FROM cronbox.dispatch_at(2000, p_now => %s)", (at(0),)).fetchone()[0] == 2000
    conn.execute("INSERT INTO cronbox.job_future (job_id, fire_at, due_at) "
                 "SELECT job_id, %s, %s FROM cronbox.job WHERE name LIKE 'newest-%%'", (at(60), at(60)))
    look_empty(conn, "outbox")
    sql = "SELECT dispatched FROM cronbox.dispatch_at(100, p_now => %s)"
    for _ in range(8):  # past PostgreSQL's five custom plans
        assert conn.execute(sql, (at(60),)).fetchone()[0] == 100
    read = rows_read_per_table(conn, sql, (at(60),))
    assert read["outbox"] < 10_000, read
    assert conn.execute("SELECT count(*) FROM cronbox.runs WHERE state = 'cancelled'").fetchone()[0] == 900


def test_a_jobs_holds_are_released_by_its_key_while_job_future_looked_empty(conn):
    # resume, remove_dependency: one job's held futures, among 20,000 held ones, found through
    # the job's key, never by walking the partial index of every held future.
    ids = held_jobs(conn, "on-hold-", "paused", paused=True)[:9]
    conn.execute("ANALYZE cronbox.job_future")
    look_empty(conn, "job_future")
    sql = "SELECT cronbox.release_job_holds(%s, %s)"
    for job_id in ids[:8]:  # past PostgreSQL's five custom plans
        assert conn.execute(sql, (job_id, at(0))).fetchone()[0] == 1
    assert rows_read_per_table(conn, sql, (ids[8], at(0)))["job_future"] < 1000
    assert conn.execute("SELECT count(*) FROM cronbox.job_future WHERE hold IS NULL").fetchone()[0] == 9
