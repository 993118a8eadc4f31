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
  python -m bench.saturation --workers 1 --spread 60           # one pass at a time; frontiers over a minute
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from datetime import timedelta
from typing import Any

import psycopg

from bench.common import Database, base_report, cpu_seconds, emit, log, parse_args
from bench.scale import insert_schedules, reset_to_empty
from poller.main import PassSizer
from poller.saturate import saturate_pass


async def saturate_all(dsn: str, batch: int, slice_s: float, horizon: timedelta, workers: int = 1,
                       hold: float = 0.5) -> dict[str, Any]:
    """`workers` loops of passes on their own connections (as a poller runs them, sharing one
    PassSizer) until none is left to claim."""
    conns = [await psycopg.AsyncConnection.connect(dsn, autocommit=True) for _ in range(workers)]
    sizer = PassSizer(hold, batch, workers=workers)
    totals = {"jobs": 0, "futures": 0, "passes": 0, "computed": 0, "longest": 0.0}

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
            if p.claimed == 0:
                return

    try:
        backends = [(await (await c.execute("SELECT pg_backend_pid()")).fetchone())[0] for c in conns]
        t0, c0, b0 = time.monotonic(), time.process_time(), sum(cpu_seconds(b) for b in backends)
        await asyncio.gather(*(loop(c) for c in conns))
        dt, py = time.monotonic() - t0, time.process_time() - c0
        server = sum(cpu_seconds(b) for b in backends) - b0
    finally:
        for c in conns:
            await c.close()
    jobs, futures = totals["jobs"], totals["futures"]
    return {"seconds": round(dt, 2), "schedules": jobs, "futures": futures, "passes": totals["passes"],
            "computed": totals["computed"], "longest_pass_s": round(totals["longest"], 3),
            "schedules_per_s": round(jobs / dt, 1), "futures_per_s": round(futures / dt, 1),
            "cpu_us_per_schedule": {"python": round(1e6 * py / max(jobs, 1), 1),
                                    "server": round(1e6 * server / max(jobs, 1), 1)}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="the saturation pass alone: schedules/s and CPU per schedule")
    p.add_argument("--schedules", type=int, default=30000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--batch", type=int, default=1000, help="jobs per pass (CRONBOX_SATURATE_BATCH)")
    p.add_argument("--slice", type=float, default=0.25, help="seconds of computing per pass (CRONBOX_SATURATE_SLICE)")
    p.add_argument("--workers", type=int, default=2, help="passes in flight at once (CRONBOX_SATURATE_WORKERS)")
    p.add_argument("--hold", type=float, default=0.5, help="seconds a pass aims to hold its locks (CRONBOX_SATURATE_HOLD)")
    p.add_argument("--spread", type=float, default=0.0,
                   help="frontiers spread over this many seconds before now (schedules created at different moments)")
    args = parse_args(p, argv)
    n = 2000 if args.quick else args.schedules
    reps = 1 if args.quick else args.reps
    with Database(args, "saturation") as database:
        report = base_report("saturation", args, database, argv)
        report["insert"] = insert_schedules(database, n, min(10, n))
        runs = []
        for k in range(reps):
            reset_to_empty(database, args.spread)
            with database.connect() as conn:
                conn.execute("CHECKPOINT")
            runs.append(asyncio.run(saturate_all(database.dsn, args.batch, args.slice, timedelta(minutes=2),
                                                  args.workers, args.hold)))
            log(f"rep {k + 1}: {runs[-1]}")
        report["runs"] = runs
        report["median"] = {k: statistics.median(r[k] for r in runs) for k in ("schedules_per_s", "futures_per_s")}
        report["median"]["cpu_us_per_schedule"] = {
            k: statistics.median(r["cpu_us_per_schedule"][k] for r in runs) for k in ("python", "server")}
    report["ok"] = all(r["schedules"] >= n for r in runs)
    m = report["median"]
    emit(args, report, [f"saturation: {n} schedules, batch {args.batch}, {args.workers} workers, "
                        f"spread {args.spread} s, {reps} reps: median "
                        f"{m['schedules_per_s']} schedules/s, {m['futures_per_s']} futures/s; CPU per schedule "
                        f"{m['cpu_us_per_schedule']} us", f"  setup held: {report['ok']}"])
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
