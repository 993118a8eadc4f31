"""The relay's SQL functions, called as psql would: claim, ack (with outcomes), nack with
backoff, dead letters, redrive, release, and the process registry. Time is driven by p_now."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import psycopg
import pytest

from cronbox import db

from .plan_support import nodes, plans_of, run_partitions_planned
from .relay_support import enqueue, notify_row
from .runs_support import fold

LEASE = timedelta(seconds=30)


def claim(conn, owner="r1", limit=100, *, include=None, exclude=None, now=None):
    now = now or conn.execute("SELECT now()").fetchone()[0]
    return conn.execute(
        "SELECT outbox_id, run_id, queue, kind, message, attempts "
        "FROM cronbox.claim_outbox_at(%s, %s, %s, %s, %s, p_now => %s)", (owner, limit, LEASE, include, exclude, now)).fetchall()


def now_of(conn) -> datetime:
    return conn.execute("SELECT now()").fetchone()[0]


def run_state(conn, run_id):
    return conn.execute("SELECT state, error, lease_until, delivered_at FROM cronbox.runs WHERE run_id = %s",
                        (run_id,)).fetchone()


def active_runs(conn, job):
    fold(conn)  # the poller's fold of statistics, as it runs every second
    return conn.execute("SELECT active_runs FROM cronbox.schedules WHERE name = %s", (job,)).fetchone()[0]


def nack(conn, owner, ids, errors, *, retryable=None, retry_after=None, max_attempts=10, now=None):
    return conn.execute(
        "SELECT retried, dead FROM cronbox.nack_outbox_at(%s, %s, %s, %s, %s::float8[], %s, '1 second', '1 minute', p_now => %s)",
        (owner, ids, errors, retryable, retry_after, max_attempts, now or now_of(conn))).fetchone()


def test_claim_returns_messages_with_deadline_and_counts_the_attempt(conn):
    runs = enqueue(conn, 3, timeout="2 minutes")
    rows = claim(conn)
    assert sorted(r[1] for r in rows) == runs
    now = now_of(conn)
    for _, run_id, queue, kind, message, attempts in rows:
        assert kind == "run" and queue == "default" and attempts == 1
        assert set(message) >= {"run_id", "job", "queue", "payload", "fire_at", "attempt", "deadline", "idempotency_key"}
        assert message["idempotency_key"] == f"{run_id}:1"
        assert datetime.fromisoformat(message["deadline"]) == now + timedelta(minutes=2)
    assert claim(conn) == []  # leased: nothing left until the lease ends
    again = claim(conn, "r2", now=now + LEASE + timedelta(seconds=1))
    assert sorted(r[1] for r in again) == runs and {r[5] for r in again} == {2}


def test_claim_sends_the_object_run_message_builds_with_its_key_and_fire_time_beside_it(conn):
    # the claim writes the message as json text (what the relay sends): the text of the object
    # cronbox.run_message builds, whatever the job's name and payload hold
    conn.execute("SET LOCAL TimeZone = 'Asia/Kolkata'")
    runs = enqueue(conn, 2, job='quo"te \\ ünïcode')
    conn.execute("UPDATE cronbox.outbox SET payload = %s WHERE outbox_id = %s",
                 (db.Jsonb({"a": [1, 2.5, None, True], "é": {"n": "x\"y\u0001"}, "": 1e20}), runs[0]))
    conn.execute("UPDATE cronbox.outbox SET payload = NULL WHERE outbox_id = %s", (runs[1],))
    expected = {r[0]: r[1:] for r in conn.execute(
        "SELECT o.outbox_id, cronbox.run_message(o.outbox_id, o.job_name, o.queue, o.payload, o.fire_at, o.attempt, "
        "       now() + o.timeout), cronbox.run_message(o.outbox_id, o.job_name, o.queue, o.payload, o.fire_at, "
        "       o.attempt, now() + o.timeout)::text FROM cronbox.outbox o WHERE o.outbox_id = ANY (%s)", (runs,))}
    notice = notify_row(conn, "default", {"event": "x", "idempotency_key": "n-1", "fire_at": "2026-01-02T03:04:05+00:00"})
    rows = conn.execute(
        "SELECT outbox_id, message::jsonb, pg_typeof(message)::text, idempotency_key, fire_at, message::text "
        "FROM cronbox.claim_outbox_at('r1', 10, '30 seconds', p_now => now())").fetchall()
    assert {r[0] for r in rows} == {*runs, notice}
    for outbox_id, message, kind, key, fire_at, text in rows:
        assert kind == "json"
        if outbox_id == notice:
            assert message == {"event": "x", "idempotency_key": "n-1", "fire_at": "2026-01-02T03:04:05+00:00"}
            assert key == "n-1" and fire_at == datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
            continue
        assert (message, text) == expected[outbox_id]  # the same text, byte for byte
        assert key == message["idempotency_key"] == f"{outbox_id}:1"
        assert fire_at == datetime.fromisoformat(message["fire_at"])
    nulls = "NULL::bigint, NULL, NULL, NULL::jsonb, NULL::timestamptz, NULL::integer, NULL::timestamptz"
    assert conn.execute(f"SELECT cronbox.run_message_json({nulls})::text = cronbox.run_message({nulls})::text").fetchone()[0]


def test_claim_honours_include_and_exclude_lists(conn):
    enqueue(conn, 2, queue="push")
    enqueue(conn, 2, queue="pull")
    assert {r[2] for r in claim(conn, exclude=["pull"])} == {"push"}
    assert claim(conn, include=["push"]) == []
    assert claim(conn, include=["other"]) == []
    assert {r[2] for r in claim(conn, include=["pull"])} == {"pull"}


def test_two_relays_claiming_at_once_get_disjoint_rows(fresh_dsn):
    with db.connect(fresh_dsn) as c:
        enqueue(c, 10)
    with db.connect(fresh_dsn, autocommit=False) as a, db.connect(fresh_dsn, autocommit=False) as b:
        first = {r[0] for r in claim(a, "a", 6)}
        second = {r[0] for r in claim(b, "b", 10)}  # a's rows are locked, not yet committed
        assert len(first) == 6 and len(second) == 4 and not first & second


def outbox_rows_read(conn, sql: str, params=()) -> int:
    """Rows that the statements run by `sql` read from the outbox's scans (returned or
    filtered out): what a claim walked, whatever it returned."""
    return sum(n["Actual Rows"] * n["Actual Loops"] + n.get("Rows Removed by Filter", 0)
               for p in plans_of(conn, sql, params, analyze=True) for n in nodes(p["Plan"])
               if n.get("Relation Name") == "outbox" and "Scan" in n["Node Type"])


def test_a_backlog_the_relay_leaves_out_costs_its_claims_nothing(conn):
    # A pulled queue nobody pulls, or a lane whose sink is down (excluded by the relay), with
    # 20,000 rows due long before the healthy queue's: the claim reads past none of them.
    conn.execute(
        "INSERT INTO cronbox.outbox (queue, message, available_at) "
        "SELECT 'stuck', '{}', now() - interval '1 hour' + g * interval '1 millisecond' "
        "FROM generate_series(1, 20000) g")
    conn.execute(
        "INSERT INTO cronbox.outbox (queue, message, available_at) "
        "SELECT 'ok', '{}', now() - interval '1 second' FROM generate_series(1, 5)")
    conn.execute("ANALYZE cronbox.outbox")
    sql = ("SELECT * FROM cronbox.claim_outbox_at('r1', 500, '30 seconds', %s, %s, p_now => now())")
    assert outbox_rows_read(conn, sql, (None, ["stuck"])) < 50
    assert conn.execute("SELECT count(*) FROM cronbox.outbox WHERE lease_owner = 'r1'").fetchone()[0] == 5
    conn.execute("UPDATE cronbox.outbox SET lease_owner = NULL, lease_until = NULL")
    assert outbox_rows_read(conn, sql, (["ok"], None)) < 50
    assert conn.execute("SELECT array_agg(DISTINCT queue) FROM cronbox.outbox WHERE lease_owner = 'r1'"
                        ).fetchone()[0] == ["ok"]


# The relay's claim and a pull worker's, 100 rows each, of an outbox whose rows are in queue 'pulled'.
CLAIMS_OF_100 = [
    "SELECT * FROM cronbox.claim_outbox_at('r1', 100, '30 seconds', p_now => now())",
    "SELECT * FROM cronbox.claim_runs_at('pulled', 'w1', 100, p_now => now())",
]


@pytest.mark.parametrize("claim_sql", CLAIMS_OF_100)
def test_a_claim_planned_while_the_outbox_looked_empty_reads_only_what_it_takes(conn, claim_sql):
    # The claims keep one plan per session, made with the statistics of the moment. After a
    # drain, VACUUM leaves statistics that say the outbox is empty (its pages, no live row)
    # while the next 200,000 runs arrive: the write of the claimed rows must still find them
    # by key, never walk the outbox once per row taken (quadratic: a pull bench stalled on it
    # for a minute per claim).
    conn.execute(
        "INSERT INTO cronbox.outbox (queue, run_id, message, available_at) "
        "SELECT 'pulled', g, '{}', now() - interval '1 minute' FROM generate_series(1, 20000) g")
    conn.execute("UPDATE pg_class SET reltuples = 0, relpages = 100 WHERE oid = 'cronbox.outbox'::regclass")
    assert outbox_rows_read(conn, claim_sql) < 500
    # taken: leased to the relay, or running on the pull worker (a run's row stays until it ends)
    assert conn.execute("SELECT count(*) FROM cronbox.outbox WHERE lease_owner = 'r1' OR worker = 'w1'"
                        ).fetchone()[0] == 100


@pytest.mark.parametrize("claim_sql", CLAIMS_OF_100)
@pytest.mark.parametrize("rows_then", [0, 10])
def test_a_claim_planned_on_a_nearly_empty_outbox_still_walks_the_index_when_it_fills(conn, claim_sql, rows_then):
    # A worker's first claim often meets an outbox that is empty or just starting to fill: the
    # plan it keeps must not be a sequential scan that was cheapest for ten rows.
    conn.execute("UPDATE pg_class SET reltuples = 0, relpages = 1 WHERE oid = 'cronbox.outbox'::regclass")
    conn.execute("INSERT INTO cronbox.outbox (queue, run_id, message, available_at) "
                 "SELECT 'pulled', g, '{}', now() - interval '1 minute' FROM generate_series(1, %s) g", (rows_then,))
    conn.execute(claim_sql)
    conn.execute(
        "INSERT INTO cronbox.outbox (queue, run_id, message, available_at) "
        "SELECT 'pulled', g, '{}', now() - interval '1 minute' FROM generate_series(%s, 20000) g", (rows_then + 1,))
    assert outbox_rows_read(conn, claim_sql) < 500


def test_a_nack_while_the_outbox_looks_empty_reads_only_the_rows_it_names(conn):
    conn.execute(
        "INSERT INTO cronbox.outbox (queue, message, available_at, lease_owner, lease_until, attempts) "
        "SELECT 'q', '{}', now(), 'r1', now() + interval '1 minute', 1 FROM generate_series(1, 20000)")
    ids = [r[0] for r in conn.execute("SELECT outbox_id FROM cronbox.outbox ORDER BY outbox_id LIMIT 100")]
    conn.execute("UPDATE pg_class SET reltuples = 0, relpages = 100 WHERE oid = 'cronbox.outbox'::regclass")
    sql = "SELECT * FROM cronbox.nack_outbox_at('r1', %s, %s, p_retryable => %s, p_now => now())"
    assert outbox_rows_read(conn, sql, (ids, ["boom"] * 100, [True] * 50 + [False] * 50)) < 500
    assert conn.execute("SELECT count(*) FROM cronbox.outbox WHERE last_error = 'boom' AND lease_owner IS NULL"
                        ).fetchone()[0] == 50
    assert conn.execute("SELECT count(*) FROM cronbox.dead_letter").fetchone()[0] == 50


def test_an_ack_planned_while_the_outbox_was_empty_reads_only_the_rows_it_names(conn):
    # The ack keeps one plan per session (a generic plan, forced), made at its first call: a
    # relay's first ack may meet an empty outbox (an ack of nothing, or a drain just ended).
    # When the next burst fills it, the ack must still find its rows by key, not walk the
    # whole outbox with the batch's ids as a filter (each leased row compared with every id).
    conn.execute("DELETE FROM cronbox.outbox")
    assert conn.execute("SELECT cronbox.ack_outbox_at('r1', '{}', p_now => now())").fetchone()[0] == 0
    conn.execute(
        "INSERT INTO cronbox.outbox (queue, message, available_at, lease_owner, lease_until, attempts) "
        "SELECT 'q', '{}', now(), 'r1', now() + interval '1 minute', 1 FROM generate_series(1, 20000)")
    ids = [r[0] for r in conn.execute("SELECT outbox_id FROM cronbox.outbox ORDER BY outbox_id LIMIT 100")]
    sql = "SELECT cronbox.ack_outbox_at('r1', %s, p_now => now())"
    assert outbox_rows_read(conn, sql, (ids,)) < 500
    assert conn.execute("SELECT count(*) FROM cronbox.outbox WHERE lease_owner = 'r1'").fetchone()[0] == 19900


def test_a_claim_takes_the_queue_with_the_oldest_waiting_row_first(conn):
    t = now_of(conn)
    for queue, ages in (("b", (30, 20)), ("a", (10, 5)), ("c", (40, 1))):
        for age in ages:
            conn.execute("INSERT INTO cronbox.outbox (queue, message, available_at) VALUES (%s, '{}', %s)",
                         (queue, t - timedelta(seconds=age)))
    # queue by queue (c's first row is the oldest, then b's, then a's), each oldest first:
    # c's newest row comes before b's second (in one order of due times it would not)
    assert sorted(r[2] for r in claim(conn, limit=3, now=t)) == ["b", "c", "c"]
    assert sorted(r[2] for r in claim(conn, limit=10, now=t)) == ["a", "a", "b"]


def test_ack_moves_runs_to_delivered_with_their_timeout(conn):
    runs = enqueue(conn, 3, timeout="90 seconds")
    rows = claim(conn)
    n = conn.execute("SELECT cronbox.ack_outbox('r1', %s)", ([r[0] for r in rows],)).fetchone()[0]
    assert n == 3
    # nothing left to send: each run's row stays the run (delivered) until its report
    assert conn.execute("SELECT count(*) FROM cronbox.outbox WHERE state IS DISTINCT FROM 'delivered' "
                        "OR lease_owner IS NOT NULL").fetchone()[0] == 0
    now = now_of(conn)
    for run_id in runs:
        state, _, lease_until, delivered_at = run_state(conn, run_id)
        assert state == "delivered" and delivered_at == now and lease_until == now + timedelta(seconds=90)


def test_ack_ignores_rows_whose_lease_another_relay_took(conn):
    enqueue(conn, 1)
    (row,) = claim(conn, "slow")
    claim(conn, "fast", now=now_of(conn) + LEASE + timedelta(seconds=1))  # slow's lease ran out
    assert conn.execute("SELECT cronbox.ack_outbox('slow', %s)", ([row[0]],)).fetchone()[0] == 0
    assert conn.execute("SELECT cronbox.ack_outbox('fast', %s)", ([row[0]],)).fetchone()[0] == 1


def test_ack_with_outcomes_completes_and_fails_runs_once(conn):
    runs = enqueue(conn, 3, job="outcomes")
    rows = {r[1]: r[0] for r in claim(conn)}
    outcomes = [
        {"outbox_id": rows[runs[0]], "state": "succeeded", "result": {"rows": 7}},
        {"outbox_id": rows[runs[1]], "state": "failed", "error": "disk full", "retryable": False},
    ]
    ids = list(rows.values())
    assert conn.execute("SELECT cronbox.ack_outbox('r1', %s, %s)", (ids, db.Jsonb(outcomes))).fetchone()[0] == 3
    assert run_state(conn, runs[0])[0] == "succeeded"
    assert run_state(conn, runs[1])[:2] == ("failed", "disk full")
    assert run_state(conn, runs[2])[0] == "delivered"
    assert active_runs(conn, "outcomes") == 1
    # The worker's result is kept; the run without an outcome is leased for the job's timeout.
    result, lease = conn.execute(
        "SELECT (SELECT result FROM cronbox.runs WHERE run_id = %s), "
        "(SELECT lease_until - delivered_at FROM cronbox.runs WHERE run_id = %s)", (runs[0], runs[2])).fetchone()
    timeout = conn.execute("SELECT timeout FROM cronbox.job WHERE name = 'outcomes'").fetchone()[0]
    assert (result, lease) == ({"rows": 7}, timeout)
    # An ack repeated after a lost commit acks nothing and records nothing more.
    assert conn.execute("SELECT cronbox.ack_outbox('r1', %s, %s)", (ids, db.Jsonb(outcomes))).fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM cronbox.runs WHERE run_id = ANY(%s) AND late_report IS NOT NULL",
                        (runs,)).fetchone()[0] == 0


def test_ack_outcomes_must_be_an_array_and_a_null_result_is_no_result(conn):
    runs = enqueue(conn, 1, job="odd-outcome")
    ids = [r[0] for r in claim(conn)]
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="p_outcomes: must be a JSON array"):
        conn.execute("SELECT cronbox.ack_outbox('r1', %s, %s)", (ids, db.Jsonb({"outbox_id": ids[0]})))
    conn.rollback()
    runs = enqueue(conn, 1, job="odd-outcome")
    ids = [r[0] for r in claim(conn)]
    outcomes = [{"outbox_id": ids[0], "state": "succeeded", "result": None}]
    assert conn.execute("SELECT cronbox.ack_outbox('r1', %s, %s)", (ids, db.Jsonb(outcomes))).fetchone()[0] == 1
    assert conn.execute("SELECT state, result IS NULL FROM cronbox.runs WHERE run_id = %s",
                        (runs[0],)).fetchone() == ("succeeded", True)


def test_ack_with_one_answer_for_every_run_finishes_only_the_rows_acked_once(conn):
    """p_outcomes as one object without outbox_id: the answer of every run acked. A plain
    success finishes each run acked (a notification's row is deleted as always; a row whose
    lease another relay took is not acked); any other answer is the same for each run."""
    runs = enqueue(conn, 3, job="all-ok")
    note = notify_row(conn, "default", {"kind": "note"})
    rows = {r[1]: r[0] for r in claim(conn, "r1")}
    theirs = rows.pop(runs[2])
    claim(conn, "r2", now=now_of(conn) + LEASE + timedelta(seconds=1))  # r2 took every lease
    conn.execute("UPDATE cronbox.outbox SET lease_owner = 'r1' WHERE outbox_id <> %s", (theirs,))
    ids = [*rows.values(), note, theirs]
    ok = db.Jsonb({"state": "succeeded"})
    assert conn.execute("SELECT cronbox.ack_outbox('r1', %s, %s)", (ids, ok)).fetchone()[0] == 3
    assert [run_state(conn, r)[0] for r in runs] == ["succeeded", "succeeded", "dispatched"]
    assert conn.execute("SELECT count(*) FROM cronbox.outbox WHERE outbox_id = %s", (note,)).fetchone()[0] == 0
    # repeated after a lost commit: nothing acked, nothing recorded twice
    assert conn.execute("SELECT cronbox.ack_outbox('r1', %s, %s)", (ids, ok)).fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM cronbox.runs WHERE run_id = ANY(%s) AND late_report IS NOT NULL",
                        (runs,)).fetchone()[0] == 0
    assert active_runs(conn, "all-ok") == 1
    # one failure for all, and one success with a result for all: each run gets it
    runs = enqueue(conn, 2, job="all-failed")
    ids = [r[0] for r in claim(conn, "r3") if r[3] == "run"]
    failed = db.Jsonb({"state": "failed", "error": "sink said no", "retryable": False})
    assert conn.execute("SELECT cronbox.ack_outbox('r3', %s, %s)", (ids, failed)).fetchone()[0] == 2
    assert [run_state(conn, r)[:2] for r in runs] == [("failed", "sink said no")] * 2
    runs = enqueue(conn, 2, job="all-result")
    ids = [r[0] for r in claim(conn, "r3") if r[3] == "run"]  # not the failures' notifications
    assert conn.execute("SELECT cronbox.ack_outbox('r3', %s, %s)",
                        (ids, db.Jsonb({"state": "succeeded", "result": {"n": 1}}))).fetchone()[0] == 2
    assert conn.execute("SELECT array_agg(result ORDER BY run_id) FROM cronbox.runs WHERE run_id = ANY(%s)",
                        (runs,)).fetchone()[0] == [{"n": 1}, {"n": 1}]


def test_ack_holds_answers_to_the_bounds_of_complete_run(conn):
    """A result past cronbox.max_result_bytes fails its run with the reason (complete_run
    refuses it); an error text is cut; a retryable that is no boolean counts as true."""
    runs = enqueue(conn, 3, job="bounded-answers")
    rows = {r[1]: r[0] for r in claim(conn)}
    conn.execute("SET cronbox.max_result_bytes = '2048'")
    outcomes = [
        {"outbox_id": rows[runs[0]], "state": "succeeded", "result": {"blob": "x" * 5000}},
        {"outbox_id": rows[runs[1]], "state": "failed", "error": "e" * 100_000, "retryable": "maybe"},
        {"outbox_id": rows[runs[2]], "state": "succeeded", "result": {"small": 1}},
    ]
    assert conn.execute("SELECT cronbox.ack_outbox('r1', %s, %s)",
                        (list(rows.values()), db.Jsonb(outcomes))).fetchone()[0] == 3
    state, error = run_state(conn, runs[0])[:2]
    assert state == "failed" and error.startswith("result: 5012 bytes as JSON text, more than cronbox.max_result_bytes (2048)")
    assert conn.execute("SELECT result FROM cronbox.runs WHERE run_id = %s", (runs[0],)).fetchone()[0] is None
    state, error = run_state(conn, runs[1])[:2]
    assert state == "failed" and len(error) <= 4000 and "truncated by cronbox" in error
    assert run_state(conn, runs[2])[0] == "succeeded"
    assert conn.execute("SELECT count(*) FROM cronbox.job_future f JOIN cronbox.job j USING (job_id) "
                        "WHERE j.name = 'bounded-answers' AND f.retry_of IS NOT NULL").fetchone()[0] == 0


def test_nack_backs_off_exponentially_with_jitter_and_honours_retry_after(conn):
    enqueue(conn, 3)
    now = now_of(conn)
    ids = sorted(r[0] for r in claim(conn))
    assert nack(conn, "r1", ids, ["HTTP 500"] * 3, retry_after=[None, None, 20]) == (3, 0)
    rows = dict(conn.execute("SELECT outbox_id, available_at - %s FROM cronbox.outbox", (now,)).fetchall())
    assert all(timedelta(seconds=0.5) <= rows[i] <= timedelta(seconds=1) for i in ids[:2]), (rows, ids)  # attempt 1: base 1s
    assert rows[ids[2]] >= timedelta(seconds=20)
    last = conn.execute("SELECT DISTINCT last_error, lease_owner FROM cronbox.outbox").fetchall()
    assert last == [("HTTP 500", None)]
    for attempt in (2, 3, 4):
        now += timedelta(minutes=5)
        claim(conn, now=now)
        nack(conn, "r1", ids[:1], ["HTTP 503"], now=now)
        delay = conn.execute("SELECT available_at - %s FROM cronbox.outbox WHERE outbox_id = %s", (now, ids[0])).fetchone()[0]
        full = timedelta(seconds=2 ** (attempt - 1))
        assert full / 2 <= delay <= full, (attempt, delay)


def test_nack_caps_backoff_at_the_maximum(conn):
    enqueue(conn, 1)
    now = now_of(conn)
    conn.execute("UPDATE cronbox.outbox SET attempts = 20")
    ids = [r[0] for r in claim(conn)]
    nack(conn, "r1", ids, ["timeout"], max_attempts=100)
    delay = conn.execute("SELECT available_at - %s FROM cronbox.outbox", (now,)).fetchone()[0]
    assert timedelta(seconds=30) <= delay <= timedelta(minutes=1)


def test_rows_out_of_attempts_become_dead_letters_and_their_runs_undeliverable(conn):
    runs = enqueue(conn, 2, job="dl")
    assert active_runs(conn, "dl") == 2
    now = now_of(conn)
    for attempt in (1, 2, 3):
        ids = sorted(r[0] for r in claim(conn, now=now))
        retried, dead = nack(conn, "r1", ids, [f"HTTP 503 #{attempt}"] * 2, max_attempts=3, now=now)
        assert (retried, dead) == ((2, 0) if attempt < 3 else (0, 2))
        now += timedelta(minutes=5)
    # the run messages are gone; what is left are the run_failed notifications for them
    left = conn.execute("SELECT kind, message->>'event' FROM cronbox.outbox").fetchall()
    assert left == [("notification", "run_failed")] * 2
    dl = conn.execute("SELECT run_id, queue, attempts, last_error, job, message->>'idempotency_key' "
                      "FROM cronbox.dead_letters ORDER BY run_id").fetchall()
    assert [(r[0], r[1], r[2], r[3], r[4]) for r in dl] == [(run, "default", 3, "HTTP 503 #3", "dl") for run in runs]
    assert dl[0][5] == f"{runs[0]}:1"
    for run_id in runs:
        assert run_state(conn, run_id)[:2] == ("failed", "undeliverable: HTTP 503 #3")
    assert active_runs(conn, "dl") == 0


def test_non_retryable_failure_dead_letters_at_once_and_leaves_others_alone(conn):
    enqueue(conn, 2)
    ids = sorted(r[0] for r in claim(conn))
    assert nack(conn, "r1", ids, ["HTTP 400: bad", "HTTP 500"], retryable=[False, True]) == (1, 1)
    assert conn.execute("SELECT outbox_id FROM cronbox.dead_letter").fetchall() == [(ids[0],)]
    assert conn.execute("SELECT outbox_id FROM cronbox.outbox WHERE kind = 'run'").fetchall() == [(ids[1],)]


def test_nack_ignores_rows_leased_to_another_relay(conn):
    enqueue(conn, 1)
    ids = [r[0] for r in claim(conn, "a")]
    assert nack(conn, "b", ids, ["x"], retryable=[False]) == (0, 0)
    assert conn.execute("SELECT lease_owner FROM cronbox.outbox").fetchone()[0] == "a"


def test_nack_rejects_mismatched_arrays(conn):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="p_errors"):
        nack(conn, "r1", [1, 2], ["only one"])


def test_redrive_puts_dead_letters_back_by_id_queue_or_everything(conn):
    a = enqueue(conn, 2, queue="a", job="ja")
    enqueue(conn, 1, queue="b", job="jb")
    rows = claim(conn)
    nack(conn, "r1", [r[0] for r in rows], ["HTTP 410"] * 3, retryable=[False] * 3)
    assert active_runs(conn, "ja") == 0
    first = conn.execute("SELECT dead_letter_id FROM cronbox.dead_letters WHERE run_id = %s", (a[0],)).fetchone()[0]

    assert conn.execute("SELECT cronbox.redrive(%s)", (first,)).fetchone()[0] == 1
    back = conn.execute("SELECT run_id, attempts, available_at <= now() FROM cronbox.outbox "
                        "WHERE kind = 'run'").fetchall()
    assert back == [(a[0], 0, True)]
    assert run_state(conn, a[0])[:2] == ("dispatched", None)
    assert active_runs(conn, "ja") == 1
    assert conn.execute("SELECT cronbox.redrive(queue => 'b')").fetchone()[0] == 1
    assert conn.execute("SELECT cronbox.redrive(everything => true)").fetchone()[0] == 1
    assert conn.execute("SELECT count(*) FROM cronbox.dead_letters").fetchone()[0] == 0
    # redriven messages are claimable and keep their idempotency key
    keys = {r[4]["idempotency_key"] for r in claim(conn) if r[3] == "run"}
    assert f"{a[0]}:1" in keys and len(keys) == 3


def test_redrive_without_a_selector_is_refused(conn):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="redrive: say which"):
        conn.execute("SELECT cronbox.redrive()")


def test_notifications_route_through_the_outbox_and_can_dead_letter(conn):
    oid = notify_row(conn, "alerts", {"event": "schedule_paused", "job": "x"})
    (row,) = claim(conn, include=["alerts"])
    assert row[3] == "notification" and row[4] == {"event": "schedule_paused", "job": "x"}  # no deadline added
    assert nack(conn, "r1", [oid], ["HTTP 404"], retryable=[False]) == (0, 1)
    assert conn.execute("SELECT kind, run_id FROM cronbox.dead_letters").fetchall() == [("notification", None)]


def test_release_makes_unsent_leases_claimable_now(conn):
    enqueue(conn, 3)
    ids = sorted(r[0] for r in claim(conn, "r1"))
    assert conn.execute("SELECT cronbox.release_outbox('r2')").fetchone()[0] == 0
    assert conn.execute("SELECT cronbox.release_outbox('r1', %s)", (ids[:1],)).fetchone()[0] == 1
    assert [r[0] for r in claim(conn, "r2")] == ids[:1]
    assert conn.execute("SELECT cronbox.release_outbox('r1')").fetchone()[0] == 2


def test_processes_register_heartbeat_and_deregister(conn):
    t0 = datetime(2030, 1, 1, tzinfo=timezone.utc)
    pid = conn.execute("SELECT cronbox.register_process_at('relay', 'relay:h:1', 'h', 1, '0.1.0', '5 seconds', "
                       "'{}', %s)", (t0,)).fetchone()[0]
    assert conn.execute("SELECT cronbox.heartbeat_process_at(%s, %s)", (pid, t0 + timedelta(seconds=4))).fetchone()[0]
    row = conn.execute("SELECT kind, host, pid, version, started_at, last_seen FROM cronbox.processes "
                       "WHERE process_id = %s", (pid,)).fetchone()
    assert row == ("relay", "h", 1, "0.1.0", t0, t0 + timedelta(seconds=4))
    # the same name again (a restarted container) replaces the entry
    again = conn.execute("SELECT cronbox.register_process('relay', 'relay:h:1', 'h', 1, '0.2.0')").fetchone()[0]
    assert again == pid
    assert conn.execute("SELECT live, version FROM cronbox.processes WHERE process_id = %s", (pid,)).fetchone() == (True, "0.2.0")
    assert conn.execute("SELECT cronbox.deregister_process(%s)", (pid,)).fetchone()[0]
    assert not conn.execute("SELECT cronbox.heartbeat_process(%s)", (pid,)).fetchone()[0]


def test_a_process_not_seen_for_three_heartbeats_is_not_live(conn):
    old = datetime.now(timezone.utc) - timedelta(seconds=16)
    pid = conn.execute("SELECT cronbox.register_process_at('poller', 'poller:h:2', 'h', 2, '0.1.0', '5 seconds', "
                       "'{}', %s)", (old,)).fetchone()[0]
    assert conn.execute("SELECT live FROM cronbox.processes WHERE process_id = %s", (pid,)).fetchone()[0] is False


def test_register_process_rejects_a_bad_kind(conn):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="^kind:"):
        conn.execute("SELECT cronbox.register_process('Relay!', 'x', 'h', 1, 'v')")


@pytest.mark.parametrize("args, field", [
    ("'relay', repeat('n', 201), 'h', 1, 'v'", "^name, host, version:"),
    ("'relay', 'n', repeat('h', 256), 1, 'v'", "^name, host, version:"),
    ("'relay', 'n', 'h', 1, repeat('v', 101)", "^name, host, version:"),
    ("'relay', 'n', 'h', 0, 'v'", "^pid:"),
    ("'relay', 'n', 'h', 1, 'v', '2 hours'", "^heartbeat_every:"),
    ("'relay', 'n', 'h', 1, 'v', '5 seconds', '[1]'", "^info:"),
    ("'relay', 'n', 'h', 1, 'v', '5 seconds', jsonb_build_object('x', repeat('x', 70000))", "^info:"),
])
def test_register_process_bounds_what_status_will_print(conn, args, field):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=field):
        conn.execute(f"SELECT cronbox.register_process({args})")


def test_unsent_rows_are_handed_back_in_their_place_with_the_attempt_taken_back(conn):
    enqueue(conn, 3, queue="down")
    before = dict(conn.execute("SELECT outbox_id, available_at FROM cronbox.outbox").fetchall())
    now = now_of(conn)
    rows = claim(conn, "r1", now=now)
    ids = [r[0] for r in rows]
    assert {r[5] for r in rows} == {1}
    assert conn.execute("SELECT cronbox.nack_outbox_unsent('r2', %s, %s)", (ids, LEASE)).fetchone()[0] == 0
    assert conn.execute("SELECT cronbox.nack_outbox_unsent('r1', %s, %s)", (ids[:2], LEASE)).fetchone()[0] == 2
    back = conn.execute("SELECT outbox_id, attempts, lease_owner, available_at FROM cronbox.outbox "
                        "WHERE outbox_id = ANY(%s) ORDER BY outbox_id", (ids,)).fetchall()
    assert [(b[1], b[2]) for b in back[:2]] == [(0, None), (0, None)]
    # claimable at once, in exactly their place before the claim (the claim never moved it)
    assert all(b[3] == before[b[0]] for b in back[:2])
    assert back[2][1:3] == (1, "r1")  # not named: still leased
    assert sorted(r[0] for r in claim(conn, "r3", now=now)) == ids[:2]


@pytest.mark.parametrize("lease", [None, "0", "-1 second", "2 days"])
def test_unsent_hand_back_refuses_a_bad_lease(conn, lease):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="p_lease"):
        conn.execute("SELECT cronbox.nack_outbox_unsent('r1', ARRAY[1]::bigint[], %s::interval)", (lease,))


def test_claim_and_ack_open_only_their_runs_partitions_however_much_history_is_kept(conn):
    # Thirty days of history kept (the default retention), every day a partition. A claim or an
    # ack that opened every partition cost more per run the longer history was kept: the
    # outbox's row-security policies used to start a scan of run on each partition in every
    # statement naming the outbox, and the claim probed run per row (migration 0193).
    for day in range(2, 32):
        conn.execute("SELECT cronbox.ensure_run_partitions_at(0, now() - make_interval(days => %s))", (day,))
    assert conn.execute("SELECT count(*) FROM pg_inherits WHERE inhparent = 'cronbox.run'::regclass"
                        ).fetchone()[0] >= 39
    enqueue(conn, 20)
    claim_sql = "SELECT * FROM cronbox.claim_outbox_at('r1', 100, '30 seconds', p_now => now())"
    for _ in range(6):  # past the custom plans: the kept plan is the one that runs from then on
        conn.execute("SAVEPOINT s")
        assert len(conn.execute(claim_sql).fetchall()) == 20
        conn.execute("ROLLBACK TO SAVEPOINT s")
    assert len(run_partitions_planned(conn, claim_sql)) <= 2
    ids = [r[0] for r in conn.execute("SELECT outbox_id FROM cronbox.outbox WHERE lease_owner = 'r1'")]
    assert len(ids) == 20
    answers = db.Jsonb([{"outbox_id": i, "state": "succeeded"} for i in ids])
    assert len(run_partitions_planned(conn, "SELECT cronbox.ack_outbox_at('r1', %s, %s, p_now => now())", (ids, answers))) <= 2
    assert conn.execute("SELECT count(*) FROM cronbox.runs WHERE state = 'succeeded'").fetchone()[0] == 20


def test_outbox_rows_are_seen_and_removed_only_by_the_owner_of_their_run(conn):
    # The outbox's policies (migration 0380: the owner of the row's job) for a role limited to
    # its own schedules: it sees and deletes its runs' messages, not another owner's, nor
    # notifications (no run).
    conn.execute("CREATE ROLE cb_policy_a IN ROLE cronbox_user")
    conn.execute("GRANT SELECT, DELETE ON cronbox.outbox TO cb_policy_a")
    conn.execute("GRANT SELECT ON cronbox.run, cronbox.job TO cb_policy_a")  # what the policies read
    mine, theirs = enqueue(conn, 2, queue="qa", job="pol-a"), enqueue(conn, 3, queue="qb", job="pol-b")
    notify_row(conn, "alerts", {"event": "x"})
    conn.execute("UPDATE cronbox.job SET owner = 'cb_policy_a' WHERE name = 'pol-a'")
    conn.execute("UPDATE cronbox.job SET owner = 'cb_policy_b' WHERE name = 'pol-b'")
    conn.execute("SET LOCAL ROLE cb_policy_a")
    assert sorted(r[0] for r in conn.execute("SELECT run_id FROM cronbox.outbox")) == mine
    assert conn.execute("DELETE FROM cronbox.outbox").rowcount == 2
    conn.execute("RESET ROLE")
    left = conn.execute("SELECT run_id FROM cronbox.outbox ORDER BY outbox_id").fetchall()
    assert [r[0] for r in left] == [None, *theirs]  # a notification's id is drawn below run ids


def test_claim_outbox_refuses_a_negative_bucket_and_a_bucket_without_rows_claims_nothing(conn):
    (run,) = enqueue(conn, 1)
    # its job's bucket: 0 on plain PostgreSQL, its group's on Citus
    bucket = conn.execute("SELECT bucket FROM cronbox.outbox WHERE run_id = %s", (run,)).fetchone()[0]
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="^p_bucket: must be NULL or a bucket"):
        with conn.transaction():  # a savepoint: the refused call wrote nothing
            conn.execute("SELECT * FROM cronbox.claim_outbox('r', 10, p_bucket => -1)")
    other = 7 if bucket != 7 else 8
    assert conn.execute("SELECT count(*) FROM cronbox.claim_outbox('r', 10, p_bucket => %s)", (other,)).fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM cronbox.claim_outbox('r', 10, p_bucket => %s)", (bucket,)).fetchone()[0] == 1


def test_list_queues_of_one_bucket_names_that_buckets_queues_and_refuses_a_negative_bucket(conn):
    (run,) = enqueue(conn, 1)
    queue, bucket = conn.execute("SELECT queue, bucket FROM cronbox.outbox WHERE run_id = %s", (run,)).fetchone()
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="^p_bucket: must be NULL or a bucket"):
        with conn.transaction():
            conn.execute("SELECT * FROM cronbox.list_queues(-1)")
    every = dict(conn.execute("SELECT queue, waiting FROM cronbox.list_queues()").fetchall())
    assert every[queue] == 1
    assert dict(conn.execute("SELECT queue, waiting FROM cronbox.list_queues(%s)", (bucket,)).fetchall())[queue] == 1
    other = 7 if bucket != 7 else 8
    assert queue not in dict(conn.execute("SELECT queue, waiting FROM cronbox.list_queues(%s)", (other,)).fetchall())
