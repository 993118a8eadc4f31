"""What keeps the console's pages cheap at scale (docs/web.md#scale): the per-minute run counts
the poller keeps (cronbox.tally_runs, cronbox.run_minutes), the name search's side table
(cronbox.search_schedules, cronbox.sync_schedule_names), and the plans of the queues view and
of an owner's runs list. Figures are measured by bench/web.py, never here."""

from __future__ import annotations

import re

import pytest

from bench.web import fill_history

from .plan_support import nodes, plans_of
from .runs_support import end_quietly, job

TALLY = "SELECT cronbox.tally_runs_at(%s, clock_timestamp() + interval '1 minute')"
PER_MINUTE_FROM_RUNS = """
    SELECT date_trunc('minute', finished_at) AS minute, queue,
           count(*) FILTER (WHERE state = 'succeeded') AS ok, count(*) FILTER (WHERE state <> 'succeeded') AS bad
    FROM cronbox.runs WHERE state IN ('succeeded', 'failed', 'lost') AND finished_at IS NOT NULL
      AND run_id >= (SELECT next_run_id FROM cronbox.run_tally_mark)
    GROUP BY 1, 2 ORDER BY 1, 2"""
VIEW = "SELECT minute, queue, succeeded, failed FROM cronbox.run_minutes ORDER BY 1, 2"


def _counts(conn) -> list[tuple]:
    return [tuple(r) for r in conn.execute(VIEW).fetchall()]


def test_run_minutes_counts_each_finished_run_once_before_and_after_the_tally(conn):
    conn.execute("DELETE FROM cronbox.run_minute")  # the shared database may hold other tests' counts
    conn.execute("UPDATE cronbox.run_tally_mark SET next_run_id = cronbox.run_id_at(now() - interval '2 hours')")
    for name in ("tally-a", "tally-b"):
        job(conn, name, queue=f"q-{name}")
    fill_history(conn, runs=3000, hours=1, jobs=["tally-a", "tally-b"])
    expected = [tuple(r) for r in conn.execute(PER_MINUTE_FROM_RUNS).fetchall()]
    assert sum(r[2] + r[3] for r in expected) > 2500
    assert _counts(conn) == expected  # nothing tallied yet: all from the live part of the view
    assert conn.execute(TALLY, (1000,)).fetchone()[0] == 1000  # a full batch: call again
    assert _counts(conn) == expected  # half counted, half live: the same sums
    while conn.execute(TALLY, (1000,)).fetchone()[0] == 1000:
        pass
    assert _counts(conn) == expected
    assert conn.execute("SELECT count(*) FROM cronbox.run_minute").fetchone()[0] > 0
    conn.execute(TALLY, (1000,))  # nothing new: nothing counted twice
    assert _counts(conn) == expected


def test_a_run_unfinished_at_the_tally_is_counted_once_when_it_finishes(conn):
    conn.execute("DELETE FROM cronbox.run_minute")
    conn.execute("DELETE FROM cronbox.run_tally_pending")
    conn.execute("UPDATE cronbox.run_tally_mark SET next_run_id = cronbox.run_id_at(now() - interval '1 hour')")
    job_id = job(conn, "slow-one", queue="q-slow")
    conn.execute("SELECT cronbox.ensure_run_partitions(1)")
    # a run in flight is its outbox row (docs/architecture.md, "One row in flight")
    run_id = conn.execute("""
        INSERT INTO cronbox.outbox (outbox_id, run_id, queue, kind, job_id, job_name, fire_at, state,
                                    dispatched_at, started_at, run_lease_until, attempt, origin)
        SELECT id, id, 'q-slow', 'run', %s, 'slow-one', now(), 'running', now(), now(),
               now() + interval '5 minutes', 1, 'schedule'
        FROM cronbox.new_run_id() AS id
        RETURNING run_id""", (job_id,)).fetchone()[0]
    conn.execute(TALLY, (1000,))
    conn.execute(TALLY, (1000,))  # still running (in flight): still pending
    assert conn.execute("SELECT run_id FROM cronbox.run_tally_pending").fetchall() == [(run_id,)]
    assert _counts(conn) == []
    end_quietly(conn, [run_id], "failed")
    assert [r[1:] for r in _counts(conn)] == [("q-slow", 0, 1)]  # seen at once (pending part of the view)
    conn.execute(TALLY, (1000,))
    conn.execute(TALLY, (1000,))
    assert [r[1:] for r in _counts(conn)] == [("q-slow", 0, 1)]
    assert conn.execute("SELECT count(*) FROM cronbox.run_tally_pending").fetchone()[0] == 0


def test_the_tally_reads_finished_pending_runs_by_key_whatever_the_statistics_say(conn):
    # A burst: the statistics of the day's partition were taken while its runs were unfinished,
    # so the planner expects few finished ones. The runs that finished since are read by
    # primary key, never by a scan of the partition (a hash join chosen then read all of the
    # day's history on every tally).
    conn.execute("DELETE FROM cronbox.run_minute")
    conn.execute("DELETE FROM cronbox.run_tally_pending")
    conn.execute("UPDATE cronbox.run_tally_mark SET next_run_id = cronbox.run_id_at(now() + interval '1 hour')")
    job_id = job(conn, "busy", queue="q-busy")
    conn.execute("SELECT cronbox.ensure_run_partitions(1)")
    # seen unfinished (in flight) by a tally, the day's statistics taken then; then they finish
    conn.execute("INSERT INTO cronbox.run_tally_pending (run_id, job_id, queue) "
                 "SELECT cronbox.run_id_at(now() - interval '1 hour') + g, %s, 'q-busy' FROM generate_series(1, 40000) g",
                 (job_id,))
    conn.execute("ANALYZE cronbox.run")
    conn.execute("ANALYZE cronbox.run_tally_pending")
    conn.execute(
        "INSERT INTO cronbox.run (run_id, job_id, job_name, queue, fire_at, state, dispatched_at, finished_at) "
        "SELECT cronbox.run_id_at(now() - interval '1 hour') + g, %s, 'busy', 'q-busy', now(), 'succeeded', now(), now() "
        "FROM generate_series(1, 40000) g", (job_id,))
    plans = plans_of(conn, TALLY, (1000,))
    seq = [n["Relation Name"] for p in plans for n in nodes(p["Plan"])
           if n.get("Relation Name", "").startswith("run_2") and n["Node Type"] == "Seq Scan"
           and n.get("Plan Rows", 0) > 1]
    assert seq == []
    # each probe of the burst's partition names its index's first column: a partition analysed
    # while it held no live row costs every index the same, and a probe by run_id planned on
    # (job_id, run_id) or (queue, run_id) scans that whole index per run (PostgreSQL 15). (Another day's partition
    # that is still empty, today's in the hour after midnight, may take any index: no run is
    # probed there.)
    burst = conn.execute("SELECT c.relname FROM cronbox.run r JOIN pg_class c ON c.oid = r.tableoid "
                         "WHERE r.run_id = cronbox.run_id_at(now() - interval '1 hour') + 1").fetchone()[0]
    leading = "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] " \
              "WHERE i.indexrelid = %s::regclass"
    unled = [(n["Index Name"], n.get("Index Cond")) for p in plans for n in nodes(p["Plan"])
             if n.get("Relation Name") == burst and "Index Name" in n
             and f"({conn.execute(leading, ('cronbox.' + n['Index Name'],)).fetchone()[0]} =" not in n.get("Index Cond", "")]
    assert unled == []
    assert any(n.get("Relation Name") == burst and "Index Name" in n for p in plans for n in nodes(p["Plan"]))
    while conn.execute(TALLY, (1000,)).fetchone()[0] == 1000:  # a chunk of the pending runs per call
        pass
    assert conn.execute("SELECT sum(succeeded) FROM cronbox.run_minute").fetchone()[0] == 40000
    assert conn.execute("SELECT count(*) FROM cronbox.run_tally_pending").fetchone()[0] == 0


def test_a_tally_looks_at_a_batch_of_the_runs_in_flight_in_turn_however_many_there_are(conn):
    # Thousands of runs in flight (relays behind a burst): each call looks at one chunk of the
    # runs it saw unfinished, from where the previous one stopped, and reads the outbox only
    # over that chunk's range (it read every unfinished run on each call: seconds). Those that
    # finished are counted once, whichever chunk they were in.
    conn.execute("DELETE FROM cronbox.run_minute")
    conn.execute("DELETE FROM cronbox.run_tally_pending")
    conn.execute("UPDATE cronbox.run_tally_mark SET next_run_id = cronbox.run_id_at(now() + interval '1 hour'), "
                 "pending_after = 0")
    job_id = job(conn, "in-flight", queue="q-flight")
    conn.execute("SELECT cronbox.ensure_run_partitions(1)")
    base = conn.execute("SELECT cronbox.run_id_at(now() - interval '1 hour')").fetchone()[0]
    conn.execute("""
        INSERT INTO cronbox.outbox (outbox_id, run_id, queue, kind, job_id, job_name, fire_at, state,
                                    dispatched_at, started_at, run_lease_until, attempt, origin)
        SELECT %(base)s + g, %(base)s + g, 'q-flight', 'run', %(job)s, 'in-flight', now(), 'running', now(), now(),
               now() + interval '5 minutes', 1, 'schedule'
        FROM generate_series(1, 2500) g""", {"base": base, "job": job_id})
    conn.execute("INSERT INTO cronbox.run_tally_pending (run_id, job_id, queue) "
                 "SELECT %s + g, %s, 'q-flight' FROM generate_series(1, 2500) g", (base, job_id))
    # every fifth of them finishes
    end_quietly(conn, [base + g for g in range(5, 2501, 5)], "succeeded")
    plans = plans_of(conn, TALLY, (1000,), analyze=True)
    read = {n["Relation Name"]: n["Actual Rows"] * n.get("Actual Loops", 1)
            for p in plans for n in nodes(p["Plan"]) if n.get("Relation Name") in ("run_tally_pending", "outbox")}
    assert 0 < read["run_tally_pending"] <= 1000 + 200  # the chunk (and the finished ones deleted from it)
    assert 0 < read["outbox"] <= 1000  # the chunk's range, not the 2,000 in flight
    assert conn.execute("SELECT sum(succeeded) FROM cronbox.run_minute").fetchone()[0] == 200
    assert conn.execute(TALLY, (1000,)).fetchone()[0] == 1000  # the next chunk
    assert conn.execute(TALLY, (1000,)).fetchone()[0] == 500   # the last: the next call starts again
    assert conn.execute("SELECT sum(succeeded) FROM cronbox.run_minute").fetchone()[0] == 500
    assert conn.execute("SELECT count(*) FROM cronbox.run_tally_pending").fetchone()[0] == 2000
    end_quietly(conn, [base + 1], "failed")  # in the first chunk again
    conn.execute(TALLY, (1000,))
    assert conn.execute("SELECT sum(succeeded), sum(failed) FROM cronbox.run_minute").fetchone() == (500, 1)


def test_tally_runs_refuses_a_bad_batch_size(conn):
    import psycopg

    with pytest.raises(psycopg.errors.InvalidParameterValue, match="p_batch: must be between 1 and 1000000"):
        conn.execute("SELECT cronbox.tally_runs(0)")


def test_name_search_finds_substrings_escapes_wildcards_and_sees_new_schedules_before_a_sync(conn):
    for name in ("nightly-report", "hourly_report", "report%done", "other"):
        job(conn, name)
    search = "SELECT array_agg(n ORDER BY n) FROM cronbox.search_schedules(%s, %s, %s) n"
    assert conn.execute(search, ("REPORT", None, 50)).fetchone()[0] == ["hourly_report", "nightly-report",
                                                                         "report%done"]
    assert conn.execute(search, ("%", None, 50)).fetchone()[0] == ["report%done"]
    assert conn.execute(search, ("y_r", None, 50)).fetchone()[0] == ["hourly_report"]
    conn.execute("SELECT cronbox.sync_schedule_names()")
    assert conn.execute("SELECT count(*) FROM cronbox.job_name_search WHERE name = 'other'").fetchone()[0] == 1
    assert conn.execute(search, ("report", "hourly_report", 1)).fetchone()[0] == ["nightly-report"]  # keyset
    conn.execute("SELECT cronbox.unschedule('other')")  # its name goes with it, before any sync
    assert conn.execute("SELECT count(*) FROM cronbox.job_name_search WHERE name = 'other'").fetchone()[0] == 0


def test_name_sync_adds_a_bounded_batch_per_call_in_id_order(conn):
    # A million schedules created at once are added a batch per call (each call a short
    # transaction), never in one; each call reports how many it added.
    sync = "SELECT cronbox.sync_schedule_names(%s)"
    conn.execute(sync, (1_000_000,))  # whatever the shared database holds already
    ids = [job(conn, f"batch-{i}") for i in range(5)]
    assert [conn.execute(sync, (2,)).fetchone()[0] for _ in range(4)] == [2, 2, 1, 0]
    assert [r[0] for r in conn.execute("SELECT job_id FROM cronbox.job_name_search WHERE name LIKE 'batch-%' "
                                       "ORDER BY job_id")] == sorted(ids)


@pytest.mark.parametrize("text, limit, message", [
    ("", 50, "p_text: must be 1 to 200 characters"), ("x" * 201, 50, "p_text: must be 1 to 200 characters"),
    ("x", 0, "p_limit: must be between 1 and 1000"),
])
def test_name_search_refuses_bad_input(conn, text, limit, message):
    import psycopg

    with pytest.raises(psycopg.errors.InvalidParameterValue, match=message):
        conn.execute("SELECT * FROM cronbox.search_schedules(%s, NULL, %s)", (text, limit))


def test_the_name_search_side_table_has_a_trigram_index(conn):
    conn.execute("SET LOCAL enable_seqscan = off")
    plan = str(conn.execute("EXPLAIN (FORMAT JSON) "
                            "SELECT 1 FROM cronbox.job_name_search WHERE name ILIKE '%report%'").fetchone()[0])
    assert "job_name_search_trgm_idx" in plan, plan


def test_queues_view_reads_only_due_and_held_futures(conn):
    # a job with one future due and one held: the view has a row to count, so its plan runs
    # cronbox.queue_waiting whatever the statistics left by other tests say (a join whose
    # other side looks empty need never run the function, and its plans would not be logged)
    conn.execute("SELECT cronbox.schedule('queues-plan', every => interval '1 hour', queue => 'queues-plan')")
    conn.execute(
        "INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at, queue, hold, held_since, hold_until) "
        "SELECT j.job_id, j.bucket, now() - d, now() - d, j.queue, h, CASE WHEN h IS NOT NULL THEN now() END, "
        "       CASE WHEN h IS NOT NULL THEN now() + interval '1 hour' END "
        "FROM cronbox.job j, (VALUES (interval '1 minute', NULL), (interval '2 minutes', 'paused')) v(d, h) "
        "WHERE j.name = 'queues-plan'")
    conn.execute("SET LOCAL enable_seqscan = off")
    # the view's plan and its function's (cronbox.queue_waiting reads the futures)
    plans = plans_of(conn, "SELECT * FROM cronbox.queues")
    plan = str(plans)
    used = sorted(set(re.findall(r"job_future_\w+", plan)))
    # ready futures by job_future_lane_idx; held ones by either partial index on held rows
    assert "job_future_lane_idx" in used, (used, plan)
    assert "job_future_held_idx" in used or "job_future_recheck_idx" in used, (used, plan)
    assert "job_future_fire_unique" not in used and "job_future_pkey" not in used, (used, plan)
    assert conn.execute("SELECT due, blocked FROM cronbox.queues WHERE queue = 'queues-plan'").fetchone() == (1, 1)
