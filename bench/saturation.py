"""bench/saturation: the saturation pass alone, in this process, from empty, with its CPU split.

bench.scale measures a real `cronbox poller` (dispatch running beside it, the machine's load
on both); this one isolates the pass: bench.scale's schedule mix is inserted, then
`poller.saturate.saturate_pass` runs on one connection until no job is left to claim, and the
report gives schedules/s, futures/s and the CPU per schedule of this process (planning,
encoding, decoding) and of its server backend (claim, store, commit), read from /proc. With
`--reps N` the table is reset to empty (frontier = next_fire = now) and saturated again N
times; medians are reported. Durable commits, as every bench.

  python -m bench.saturation --schedules 30000 --reps 3
  python -m bench.saturation --schedules 30000 --batch 100     # the former default batch
  python -m bench.saturation --workers 1,2 --spread 60         # one pass at a time against two; frontiers over a minute
  python -m bench.saturation --schedules 300000 --reps 1 --profile --perf /tmp/sat.perf
      # the last rep profiled: every statement (pg_stat_statements, track=all) per schedule,
      # with its buffers and WAL; table and index sizes; `perf record -g` on the backends
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from typing import Any

import psycopg

from bench.common import Database, base_report, cpu_seconds, emit, log, parse_args
from bench.database import WaitSampler
from bench.scale import insert_schedules, reset_to_empty
from poller.sizing import PassSizer
from poller.saturate import saturate_pass


async def saturate_all(dsn: str, batch: int, slice_s: float, horizon: timedelta, workers: int = 1,
                       hold: float = 0.5, total: int = 0, perf: str | None = None) -> dict[str, Any]:
    """`workers` loops of passes on their own connections (as a poller runs them, sharing one
    PassSizer) until none is left to claim."""
    conns = [await psycopg.AsyncConnection.connect(dsn, autocommit=True) for _ in range(workers)]
    sizer = PassSizer(hold, batch, workers=workers)
    totals = {"jobs": 0, "futures": 0, "passes": 0, "computed": 0, "longest": 0.0}
    # schedules/s over each tenth of the run (by schedules done): flat in table size or not
    marks: list[tuple[int, float, float, float]] = []  # (jobs, wall, own CPU, backends' CPU)
    backends: list[int] = []
    step = max(1, total // 10) if total else 0

    async def loop(conn: psycopg.AsyncConnection) -> None:
        while True:
            asked = sizer.jobs()
            p = await saturate_pass(conn, batch=asked, horizon=horizon, grace=timedelta(seconds=30),
                                    budget=slice_s, scale=sizer.scale, late_scale=sizer.late_scale())
            sizer.observe(p, asked)
            totals["passes"] += 1
            totals["jobs"] += p.planned
            totals["futures"] += p.futures
            totals["computed"] += p.computed
            totals["longest"] = max(totals["longest"], p.seconds)
            if step and totals["jobs"] >= (len(marks) + 1) * step:
                marks.append((totals["jobs"], time.monotonic(), time.process_time(),
                              sum(cpu_seconds(b) for b in backends)))
            if p.claimed == 0:
                return

    try:
        backends[:] = [(await (await c.execute("SELECT pg_backend_pid()")).fetchone())[0] for c in conns]
        recorder = None
        if perf:  # the backends' CPU by function (perf report -i FILE --no-children)
            recorder = subprocess.Popen(["perf", "record", "-g", "-q", "-o", perf, "-p", ",".join(map(str, backends))],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t0, c0, b0 = time.monotonic(), time.process_time(), sum(cpu_seconds(b) for b in backends)
        await asyncio.gather(*(loop(c) for c in conns))
        dt, py = time.monotonic() - t0, time.process_time() - c0
        server = sum(cpu_seconds(b) for b in backends) - b0
        if recorder is not None:
            recorder.send_signal(2)
            recorder.wait(60)
    finally:
        for c in conns:
            await c.close()
    jobs, futures = totals["jobs"], totals["futures"]
    tenths, cpu_tenths, prev = [], [], (0, t0, c0, b0)
    for mark in marks:
        done, at, own, back = mark
        n = max(done - prev[0], 1)
        tenths.append(round(n / max(at - prev[1], 1e-6)))
        cpu_tenths.append([round(1e6 * (own - prev[2]) / n, 1), round(1e6 * (back - prev[3]) / n, 1)])
        prev = mark
    return {"seconds": round(dt, 2), "schedules": jobs, "futures": futures, "passes": totals["passes"],
            "computed": totals["computed"], "longest_pass_s": round(totals["longest"], 3),
            "schedules_per_s": round(jobs / dt, 1), "schedules_per_s_by_tenth": tenths,
            "cpu_us_per_schedule_by_tenth": cpu_tenths, "futures_per_s": round(futures / dt, 1),
            "cpu_us_per_schedule": {"python": round(1e6 * py / max(jobs, 1), 1),
                                    "server": round(1e6 * server / max(jobs, 1), 1)}}


def profile(database: Database, jobs: int) -> dict[str, Any]:
    """Where the server's time went, by statement (pg_stat_statements, track=all: the statements
    inside cronbox functions too), per schedule planned; and the sizes the pass works on."""
    with database.connect() as conn:
        rows = conn.execute(
            "SELECT calls, total_exec_time, rows, shared_blks_hit, shared_blks_read, shared_blks_dirtied, "
            "wal_records, wal_bytes, toplevel, regexp_replace(left(query, 160), '\\s+', ' ', 'g') "
            "FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "ORDER BY total_exec_time DESC LIMIT 25").fetchall()
        sizes = conn.execute(
            "SELECT c.relname, pg_relation_size(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'cronbox' AND c.relkind IN ('r', 'i') AND pg_relation_size(c.oid) > 8 * 1024 * 1024 "
            "ORDER BY 2 DESC").fetchall()
    per = max(jobs, 1)
    return {"statements": [{"calls": r[0], "total_ms": round(r[1], 1), "us_per_schedule": round(1000 * r[1] / per, 1),
                            "rows": r[2], "blks_hit_per_schedule": round(r[3] / per, 2),
                            "blks_read_per_schedule": round(r[4] / per, 3),
                            "blks_dirtied_per_schedule": round(r[5] / per, 3),
                            "wal_records_per_schedule": round(r[6] / per, 2), "wal_bytes_per_schedule": round(float(r[7]) / per),
                            "toplevel": r[8], "query": r[9]} for r in rows],
            "sizes_mb": {name: round(b / 2**20, 1) for name, b in sizes}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="the saturation pass alone: schedules/s and CPU per schedule")
    p.add_argument("--schedules", type=int, default=30000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--batch", type=int, default=1000, help="jobs per pass (CRONBOX_SATURATE_BATCH)")
    p.add_argument("--slice", type=float, default=0.25, help="seconds of computing per pass (CRONBOX_SATURATE_SLICE)")
    p.add_argument("--workers", default="2",
                   help="passes in flight at once (CRONBOX_SATURATE_WORKERS); a list (1,2) alternates them rep by rep")
    p.add_argument("--hold", type=float, default=0.5, help="seconds a pass aims to hold its locks (CRONBOX_SATURATE_HOLD)")
    p.add_argument("--profile", action="store_true",
                   help="profile the last rep: every statement (track=all) per schedule, with buffers and WAL; sizes")
    p.add_argument("--perf", metavar="FILE", help="perf record -g the backends of the last rep into FILE")
    p.add_argument("--spread", type=float, default=0.0,
                   help="frontiers spread over this many seconds before now (schedules created at different moments)")
    args = parse_args(p, argv)
    n = 2000 if args.quick else args.schedules
    reps = 1 if args.quick else args.reps
    with Database(args, "saturation") as database:
        report = base_report("saturation", args, database, argv)
        report["insert"] = insert_schedules(database, n, min(10, n))
        workers = [int(w) for w in str(args.workers).split(",")]
        runs: dict[int, list[dict[str, Any]]] = {w: [] for w in workers}
        for k in range(reps):
            for w in workers:  # alternated: the machine's other load falls on each alike
                reset_to_empty(database, args.spread)
                with database.connect() as conn:
                    conn.execute("CHECKPOINT")
                last = k == reps - 1 and w == workers[-1]
                if args.profile and last:
                    database.set_statement_tracking("all")
                    database.reset_statements()
                load = os.getloadavg()[0]
                before = database.counters()
                # with --profile, what the backends wait on (sampled every 0.1 s; 'on CPU' when not waiting)
                with WaitSampler(database, interval=0.1) if args.profile and last else contextlib.nullcontext() as waits:
                    run = asyncio.run(saturate_all(database.dsn, args.batch, args.slice, timedelta(minutes=2),
                                                   w, args.hold, n, args.perf if last else None))
                if waits is not None:
                    run["waits"] = waits.top(8)
                # WAL written per schedule (the server's, over the run; full-page images included)
                run["wal_bytes_per_schedule"] = round(
                    (database.counters()["wal_bytes"] - before["wal_bytes"]) / max(run["schedules"], 1))
                run["load_after"] = round(os.getloadavg()[0], 2)
                runs[w].append({"workers": w, "load_before": round(load, 2), **run})
                if args.profile and last:
                    report["profile"] = profile(database, runs[w][-1]["schedules"])
                log(f"rep {k + 1}, {w} workers: {runs[w][-1]}")
        report["runs"] = [r for w in workers for r in runs[w]]
        report["median"] = {}
        for w in workers:
            m = {k: statistics.median(r[k] for r in runs[w])
                 for k in ("schedules_per_s", "futures_per_s", "wal_bytes_per_schedule")}
            m["cpu_us_per_schedule"] = {
                k: statistics.median(r["cpu_us_per_schedule"][k] for r in runs[w]) for k in ("python", "server")}
            report["median"][w] = m
        if len(workers) > 1:
            base = report["median"][workers[0]]["schedules_per_s"]
            report["ratio_to_first"] = {w: round(report["median"][w]["schedules_per_s"] / base, 2) for w in workers}
    report["ok"] = all(r["schedules"] >= n for r in report["runs"])
    lines = [f"saturation: {n} schedules, batch {args.batch}, spread {args.spread} s, {reps} reps, "
             f"load {min(r['load_before'] for r in report['runs'])}-{max(r['load_before'] for r in report['runs'])}:"]
    for w, m in report["median"].items():
        lines.append(f"  {w} workers: median {m['schedules_per_s']} schedules/s, {m['futures_per_s']} futures/s; "
                     f"CPU per schedule {m['cpu_us_per_schedule']} us; WAL {m['wal_bytes_per_schedule']} bytes per schedule")
    for st in report.get("profile", {}).get("statements", [])[:12]:
        lines.append(f"  {st['us_per_schedule']:8.1f} us/schedule {st['calls']:7d} calls "
                     f"{st['blks_hit_per_schedule']:6.1f} hit {st['blks_dirtied_per_schedule']:5.2f} dirtied "
                     f"{st['wal_records_per_schedule']:5.2f} WAL  {st['query'][:90]}")
    if "ratio_to_first" in report:
        lines.append(f"  schedules/s against {workers[0]} workers: {report['ratio_to_first']}")
    emit(args, report, lines + [f"  setup held: {report['ok']}"])
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
