"""cronbox.runs says why a fire waits: fires held back from dispatch (a pool's units, a queue's
limit, dependencies, an earlier run) are rows of state 'waiting' with no run_id, and leave the
view's history plans alone."""

from __future__ import annotations

import json

from psycopg.types.json import Jsonb

from cronbox import status

from .runs_support import active, complete, dispatch, future, job


def waiting(conn) -> list[tuple]:
    return conn.execute("""
        SELECT job, run_id, attempt, waiting_for, needs, waiting_since IS NOT NULL
        FROM cronbox.runs WHERE state = 'waiting' ORDER BY job, fire_at""").fetchall()


def test_fires_held_for_a_pool_a_queue_limit_dependencies_or_an_earlier_run_show_why_they_wait(conn):
    conn.execute("SELECT cronbox.set_pool('gpu', 8)")
    conn.execute("SELECT cronbox.set_queue_limit('narrow', 1)")
    job(conn, "train-a", needs=Jsonb({"gpu": 8}))
    job(conn, "train-b", needs=Jsonb({"gpu": 8}), priority=1)
    job(conn, "n1", queue="narrow")
    job(conn, "n2", queue="narrow", priority=1)
    job(conn, "extract")
    job(conn, "load")
    conn.execute("SELECT cronbox.add_dependency('load', 'extract')")
    job(conn, "buffered", overlap="buffer_one")
    for name in ("train-a", "train-b", "n1", "n2", "load", "buffered"):
        future(conn, name, 0)
    future(conn, "buffered", 10)
    dispatch(conn, 0)
    dispatch(conn, 10)
    assert waiting(conn) == [
        ("buffered", None, 1, "earlier run", None, True),
        ("load", None, 1, "dependencies", None, True),
        ("n2", None, 1, "queue narrow", None, True),
        ("train-b", None, 1, "pool gpu", {"gpu": 8}, True),
    ]
    # the run that holds the units says so; a waiting row is not a run: no run_id, no timings
    (a,) = active(conn, "train-a")
    assert conn.execute("SELECT needs, waiting_for FROM cronbox.runs WHERE run_id = %s", (a,)).fetchone() == (
        {"gpu": 8}, None)
    row = conn.execute("SELECT dispatched_at, idempotency_key, trouble, payload FROM cronbox.runs "
                       "WHERE job = 'train-b'").fetchone()
    assert row == (None, None, None, {})
    # once the units come back the waiting fire is a run, and no longer waiting
    complete(conn, a, 20)
    dispatch(conn, 20)
    assert [w[0] for w in waiting(conn)] == ["buffered", "load", "n2"]
    assert conn.execute("SELECT state FROM cronbox.runs WHERE job = 'train-b'").fetchall() == [("dispatched",)]
    # a paused job's fires are held too, but they are not waiting to run
    conn.execute("SELECT cronbox.pause('load')")
    assert [w[0] for w in waiting(conn)] == ["buffered", "n2"]


def _plan(conn, query: str, *params) -> tuple[set[str], set[str]]:
    """The relations a query's plan reads and its node types."""
    relations: set[str] = set()
    nodes: set[str] = set()

    def reads(node: dict) -> set[str]:
        return ({node["Relation Name"]} if "Relation Name" in node else set()).union(
            *(reads(c) for c in node.get("Plans", [])))

    def walk(node: dict) -> None:
        # a sort of the runs in flight (the outbox: as small as the work in flight; sorted or
        # walked backwards as its size says) is no sort of history
        if node["Node Type"] == "Sort" and reads(node) <= {"outbox", "job"}:
            return
        nodes.add(node["Node Type"])
        if "Relation Name" in node:
            relations.add(node["Relation Name"])
        for child in node.get("Plans", []):
            walk(child)

    walk(conn.execute("EXPLAIN (FORMAT JSON) " + query, params).fetchone()[0][0]["Plan"])
    return relations, nodes


def test_history_queries_do_not_read_the_waiting_fires_and_waiting_reads_no_history(conn):
    conn.execute("SELECT cronbox.ensure_run_partitions(1)")
    # on the suite's small shared tables the planner may prefer a bitmap scan and a sort of a
    # job's few runs (a cost choice that flipped with other tests' rows): off, as seqscan, so the
    # plan shows the view's shape
    conn.execute("SET LOCAL enable_seqscan = off")
    conn.execute("SET LOCAL enable_bitmapscan = off")
    # what the console and the client read: a run, a page of history, a job's newest, a time
    # range, failures: the waiting arm is gone when the query is planned, nothing is sorted
    for query, params in [
        ("SELECT * FROM cronbox.runs WHERE run_id = %s", (1 << 62,)),
        ("SELECT run_id FROM cronbox.runs WHERE run_id IS NOT NULL ORDER BY run_id DESC LIMIT 51", ()),
        ("SELECT run_id FROM cronbox.runs WHERE run_id IS NOT NULL AND job_id = %s ORDER BY run_id DESC LIMIT 51", (1,)),
        ("SELECT run_id FROM cronbox.runs WHERE run_id < %s ORDER BY run_id DESC LIMIT 51", (1 << 62,)),
        ("SELECT run_id FROM cronbox.runs WHERE run_id IS NOT NULL AND trouble = 'failed' "
         "ORDER BY run_id DESC LIMIT 51", ()),
    ]:
        relations, nodes = _plan(conn, query, *params)
        assert "job_future" not in relations and "Sort" not in nodes, (query, relations, nodes)
        assert nodes & {"Index Scan", "Index Only Scan", "Result"}, (query, nodes)
    # the waiting fires: the held futures only, never a partition of history
    relations, _ = _plan(conn, "SELECT * FROM cronbox.runs WHERE state = 'waiting' ORDER BY waiting_since LIMIT 50")
    assert "job_future" in relations and not any(r.startswith("run") for r in relations), relations


def test_status_lists_the_waiting_fires_and_why(fresh_dsn):
    from cronbox import db

    with db.connect(fresh_dsn) as conn:
        conn.execute("SELECT cronbox.set_pool('gpu', 0)")
        conn.execute("SELECT cronbox.schedule('train', every => '1 hour', needs => '{\"gpu\": 2}')")
        conn.execute("SELECT cronbox.trigger('train')")
    data = status.collect(fresh_dsn)
    found = data["waiting"]
    assert [(r["job"], r["waiting_for"]) for r in found.rows] == [("train", "pool gpu")], found
    text = status.render(data, 50)
    assert "waiting:" in text and "pool gpu" in text, text
