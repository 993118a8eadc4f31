"""bench/canary: an every-second canary on its own queue, fire -> dispatch, while one real
`cronbox poller` takes a heavy load from another tenant:

  catchups   N schedules (default 1,000) starting a year back with catchup => 'all', window
             366 days, created in one transaction;
  backfills  N hourly schedules (default 100), then a backfill of the past year for each, all
             requested in one transaction;
  million    N schedules (default 1,000,000, bench.scale's mix) inserted from empty while the
             poller runs (it saturates them all).

For each load (a fresh private cluster each): the canary's fire -> dispatch p50/p99/max over
the watch window, its fires missed (no dispatched run for a second of the window), the longest
transaction any other session held open (sampled), the least time the canary's materialised
fires reached ahead (below 0: its futures ran out, its refill waited behind other jobs'
saturation), and how far the load got meanwhile. No relay runs: dispatch is what is measured
(the outbox just grows). `--trace FILE` appends the samples (the canary's saturation state,
every other session's state, wait event and statement) as JSON lines.

  python -m bench.canary                       # all three loads, full size, 60 s each
  python -m bench.canary --load catchups --watch 30
  python -m bench.canary --quick               # small sizes, 20 s each
  python -m bench.canary --load million --watch 120 --trace trace.jsonl
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from typing import Any

from bench import scale
from bench.common import Database, Fleet, base_report, emit, extra_env, log, parse_args, pct, wait_until, workdir

LOADS = ("catchups", "backfills", "million")
SIZES = {"catchups": 1000, "backfills": 100, "million": 1_000_000}
QUICK = {"catchups": 200, "backfills": 20, "million": 20_000}

CATCHUPS = """
SELECT count(cronbox.schedule(
    'year-' || g,
    cron => (ARRAY['0 * * * *', '*/15 * * * *', '30 2 * * *', '*/5 * * * *', '0 0 29 2 *'])[1 + g %% 5],
    timezone => (ARRAY['UTC', 'Europe/Berlin', 'America/New_York', 'Australia/Lord_Howe'])[1 + g %% 4],
    starts_at => now() - interval '1 year' + (g %% 1000) * interval '7 hours',
    catchup => 'all', catchup_window => '366 days', queue => 'tenant', overlap => 'allow'))
FROM generate_series(1, %s) g"""

# --trace: what the canary and every other session are doing, sampled with the longest transaction
TRACE_CANARY = """
SELECT clock_timestamp(), f.frontier, f.next_fire,
       (SELECT count(*) FROM cronbox.job_future u WHERE u.job_id = f.job_id),
       (SELECT max(u.fire_at) FROM cronbox.job_future u WHERE u.job_id = f.job_id)
FROM cronbox.job j JOIN cronbox.job_fire f USING (job_id) WHERE j.name = 'canary'"""
TRACE_SESSIONS = """
SELECT pid, application_name, state, wait_event_type, wait_event,
       extract(epoch FROM clock_timestamp() - xact_start), extract(epoch FROM clock_timestamp() - query_start),
       left(regexp_replace(query, '\\s+', ' ', 'g'), 80)
FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
  AND state <> 'idle'"""

LONGEST_TRANSACTION = """
SELECT extract(epoch FROM coalesce(max(clock_timestamp() - xact_start), interval '0'))
FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
  AND state <> 'idle' AND xact_start IS NOT NULL"""


def start_load(database: Database, load: str, n: int) -> dict[str, Any]:
    t0 = time.monotonic()
    with database.connect() as conn:
        if load == "catchups":
            with conn.transaction():
                conn.execute(CATCHUPS, (n,))
        elif load == "backfills":
            with conn.transaction():
                conn.execute(
                    "SELECT count(cronbox.backfill('hourly-' || g, now() - interval '1 year', now())) "
                    "FROM generate_series(1, %s) g", (n,))
    if load == "million":
        scale.insert_schedules(database, n, min(n, 1000))
    return {"seconds_to_request": round(time.monotonic() - t0, 2)}


def prepare(database: Database, load: str, n: int) -> None:
    """What must exist before the load (backfills need saturated hourly jobs)."""
    if load == "backfills":
        with database.connect() as conn, conn.transaction():
            conn.execute(
                "SELECT count(cronbox.schedule('hourly-' || g, cron => '0 * * * *', catchup => 'skip', "
                "queue => 'tenant', overlap => 'allow')) FROM generate_series(1, %s) g", (n,))


def progress(database: Database, load: str) -> dict[str, Any]:
    with database.connect() as conn:
        if load == "catchups":
            return {"catch_up_runs_dispatched": conn.execute(
                "SELECT count(*) FROM cronbox.runs WHERE queue = 'tenant'").fetchone()[0],
                "futures_waiting": conn.execute("SELECT count(*) FROM cronbox.job_future").fetchone()[0]}
        if load == "backfills":
            return {"backfills": dict(conn.execute(
                "SELECT state, count(*) FROM cronbox.backfills GROUP BY 1").fetchall()),
                "backfill_runs": conn.execute(
                    "SELECT count(*) FROM cronbox.runs WHERE origin = 'backfill'").fetchone()[0]}
        return {"unsaturated_jobs": conn.execute(
            "SELECT count(*) FROM cronbox.job_fire WHERE next_fire IS NOT NULL AND NOT paused "
            "AND next_fire <= now() + interval '1 minute'").fetchone()[0],
            "futures": conn.execute("SELECT count(*) FROM cronbox.job_future").fetchone()[0]}


def run_load(args: argparse.Namespace, argv: list[str] | None, load: str, n: int, watch: float) -> dict[str, Any]:
    with Database(args, "canary") as database, workdir("canary", keep=args.keep) as logdir, Fleet(logdir) as fleet:
        report: dict[str, Any] = {"load": load, "size": n, "watch_s": watch}
        prepare(database, load, n)
        with database.connect() as conn:
            conn.execute("SELECT cronbox.schedule('canary', every => '1 second', queue => 'canary', overlap => 'allow')")
        poller = fleet.cronbox("poller", database.dsn, extra_env(args))
        wait_until(lambda: database.scalar("SELECT count(*) FROM cronbox.runs WHERE job = 'canary'") >= 3,
                   timeout=120, what="the canary running")
        if load == "backfills":  # the hourly jobs saturated (their next fire computed, past the horizon)
            wait_until(lambda: not database.scalar(
                "SELECT count(*) FROM cronbox.job j JOIN cronbox.job_fire f USING (job_id) WHERE j.name LIKE 'hourly-%%' "
                "AND (f.next_fire IS NULL OR f.next_fire <= now() + interval '1 minute')"),
                timeout=300, what="hourly jobs saturated")
        cpu0 = poller.cpu()
        report["request"] = start_load(database, load, n)
        # the window starts once the load is in (a million inserted schedules take minutes)
        t0 = database.scalar("SELECT now()")
        longest = 0.0
        reserve = None  # the least time the canary's materialised fires reached ahead (its frontier - now)
        trace = open(args.trace, "a") if args.trace else None
        with database.connect() as watcher, contextlib.closing(trace) if trace else contextlib.nullcontext():
            while watcher.execute("SELECT clock_timestamp() < %s + make_interval(secs => %s)",
                                  (t0, watch)).fetchone()[0]:
                longest = max(longest, float(watcher.execute(LONGEST_TRANSACTION).fetchone()[0]))
                at, frontier, next_fire, futures, last = watcher.execute(TRACE_CANARY).fetchone()
                ahead = (frontier - at).total_seconds()
                reserve = ahead if reserve is None else min(reserve, ahead)
                if trace:
                    sessions = watcher.execute(TRACE_SESSIONS).fetchall()
                    trace.write(json.dumps({
                        "t": round((at - t0).total_seconds(), 3), "frontier": str(frontier), "next_fire": str(next_fire),
                        "futures": futures, "last_future": str(last),
                        "sessions": [[r[0], r[1], r[2], r[3], r[4], r[5] and round(float(r[5]), 3),
                                      r[6] and round(float(r[6]), 3), r[7]] for r in sessions]}) + "\n")
                time.sleep(0.05)
            wait_until(lambda: watcher.execute(
                "SELECT NOT EXISTS (SELECT 1 FROM cronbox.job_future f JOIN cronbox.job j USING (job_id) "
                "WHERE j.name = 'canary' AND f.fire_at <= %s + make_interval(secs => %s))", (t0, watch)).fetchone()[0],
                timeout=60, what="the canary's window dispatched")
            rows = watcher.execute(
                "SELECT fire_at, state, extract(epoch FROM dispatched_at - fire_at) * 1000 FROM cronbox.runs "
                "WHERE job = 'canary' AND fire_at > %s AND fire_at <= %s + make_interval(secs => %s) "
                "ORDER BY fire_at", (t0, t0, watch)).fetchall()
            # the other queues' fires of the window: how many, the most sharing one fire time (a
            # burst), and how late the latest of them went (their backlog beside the canary)
            runs, burst, late = watcher.execute(
                "SELECT coalesce(sum(b.n), 0), coalesce(max(b.n), 0), max(b.late) FROM ("
                "  SELECT count(*) AS n, max(extract(epoch FROM dispatched_at - fire_at)) AS late FROM cronbox.runs "
                "  WHERE job <> 'canary' AND fire_at > %s AND fire_at <= %s + make_interval(secs => %s) "
                "  GROUP BY fire_at) b", (t0, t0, watch)).fetchone()
            report["other_fires_in_window"] = {"runs": int(runs), "largest_burst": int(burst),
                                               "latest_dispatch_s": None if late is None else round(float(late), 2)}
        report["poller_cpu_s"] = round(poller.cpu() - cpu0, 1)
        report["progress_at_end_of_window"] = progress(database, load)
        fleet.check_alive()
        lags = sorted(float(r[2]) for r in rows if r[1] == "dispatched" and r[2] is not None)
        expected = int(watch)
        report["canary"] = {
            "fires_expected": expected,
            "dispatched": len(lags),
            "missed": expected - len(lags),
            "states": {s: sum(1 for r in rows if r[1] == s) for s in {r[1] for r in rows}},
            "fire_to_dispatch_ms": {"p50": pct(lags, 50), "p99": pct(lags, 99), "max": lags[-1] if lags else None},
            # (seconds into the window, lag in seconds) of each fire dispatched over 1 s late
            "over_1s": [(round((r[0] - t0).total_seconds(), 1), round(float(r[2]) / 1000, 2))
                        for r in rows if r[2] is not None and float(r[2]) > 1000],
        }
        report["longest_transaction_s"] = round(longest, 3)
        # below 0: the canary's fires ran out (its refill waited behind other jobs' saturation)
        report["canary_reserve_min_s"] = None if reserve is None else round(reserve, 2)
        return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="the every-second canary under three heavy loads")
    p.add_argument("--load", choices=LOADS, action="append", help="one load (repeatable; default all three)")
    p.add_argument("--size", type=int, help="the load's size (default per load: 1,000 / 100 / 1,000,000)")
    p.add_argument("--trace", help="append a sample every ~50 ms of the window to this file (JSON lines): the "
                                   "canary's frontier, next fire and futures, and every non-idle session's state, "
                                   "wait event and query")
    p.add_argument("--watch", type=float, help="seconds watched after the load is requested (default 60; quick 20)")
    args = parse_args(p, argv)
    loads = args.load or list(LOADS)
    watch = args.watch or (20.0 if args.quick else 60.0)
    report: dict[str, Any] = {}
    with Database(args, "canary-info") as database:
        report = base_report("canary", args, database, argv)
    report["loads"] = []
    for load in loads:
        n = args.size or (QUICK if args.quick else SIZES)[load]
        log(f"load {load} ({n}), watching the canary {watch} s")
        report["loads"].append(run_load(args, argv, load, n, watch))
    report["ok"] = all(r["canary"]["missed"] == 0 for r in report["loads"])
    emit(args, report, summary(report))
    return 0


def summary(r: dict[str, Any]) -> list[str]:
    lines = [f"canary: {'durable' if r['durable'] else 'NOT durable'}"]
    for x in r["loads"]:
        c = x["canary"]
        lines.append(f"  {x['load']} ({x['size']}): canary fire->dispatch p50 {c['fire_to_dispatch_ms']['p50']} ms, "
                     f"p99 {c['fire_to_dispatch_ms']['p99']} ms, max {c['fire_to_dispatch_ms']['max']} ms, "
                     f"missed {c['missed']} of {c['fires_expected']}; its fires materialised ahead at least "
                     f"{x['canary_reserve_min_s']} s; longest transaction {x['longest_transaction_s']} s; "
                     f"poller CPU {x['poller_cpu_s']} s; {x['progress_at_end_of_window']}; "
                     f"other queues' fires in the window {x['other_fires_in_window']}")
    return lines


if __name__ == "__main__":
    sys.exit(main())
