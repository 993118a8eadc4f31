"""The raw SQL limit of bench/throughput: the same row work as cronbox, no Python in the path.

run_raw: the three stage procedures of bench/raw.sql at once (a pipeline, like the cronbox
processes). stages: each stage alone with pgbench (bench/pgbench/*.sql), the raw statement vs
the cronbox function, to show which stage's SQL costs what.

Alone, `python -m bench.rawlimit` runs the raw pipeline `--reps` times (200,000 rows each) and
reports each repetition; it fails (exit 1) when a repetition is incomplete or slower than half
the median (a stall: the figure would not be the limit it claims to be).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from typing import Any

import statistics
import sys

from bench.common import REPO, Database, base_report, emit, log, parse_args, per_run, postgres_cpu
from bench.pipeline import load, outcome

def run_raw(database: Database, args: argparse.Namespace, n: int) -> dict[str, Any]:
    load(database, n, None)
    psql = str(database.bindir() / "psql")
    base = [psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", *database.libpq_args()]
    pg0, c0 = postgres_cpu(database.postmaster), database.counters()
    t0 = time.monotonic()
    # Custom plans: a generic plan cached while a table was nearly empty must not outlive it.
    env = {**os.environ, "PGOPTIONS": "-c plan_cache_mode=force_custom_plan"}
    procs = [subprocess.Popen([*base, "-c", f"CALL bench_raw.{stage}_loop({args.batch})"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
             for stage in ("complete", "deliver", "dispatch")]
    errors = []
    for p in procs:
        _, err = p.communicate(timeout=120 + n / 200)
        if p.returncode != 0:
            errors.append(err.decode(errors="replace").strip())
    wall = time.monotonic() - t0
    if errors:
        raise RuntimeError("raw pipeline failed: " + " | ".join(errors))
    pg1, c1 = postgres_cpu(database.postmaster), database.counters()
    res = outcome(database, n)
    res["wall_s"] = round(wall, 3)
    if pg0 is not None and pg1 is not None:
        res["cpu_s"] = {"postgres": round(pg1 - pg0, 2)}
        res["cpu_ms_per_run"] = {"postgres": round(1000 * (pg1 - pg0) / n, 4)}
    res["per_run"] = per_run(c0, c1, n)
    return res


def install_raw(database: Database) -> None:
    with database.connect() as conn:
        conn.execute((REPO / "bench" / "raw.sql").read_text())


def pgbench_stage(database: Database, script: str, n: int, batch: int) -> dict[str, Any]:
    exe = str(database.bindir() / "pgbench")
    tx = -(-n // batch)
    pg0 = postgres_cpu(database.postmaster)
    t0 = time.monotonic()
    proc = subprocess.run([exe, "-n", "-c", "1", "-j", "1", "-t", str(tx), "-D", f"batch={batch}",
                           "-f", str(REPO / "bench" / "pgbench" / script), *database.libpq_args()],
                          capture_output=True, text=True, timeout=600)
    wall = time.monotonic() - t0
    pg1 = postgres_cpu(database.postmaster)
    if proc.returncode != 0:
        return {"error": (proc.stderr or proc.stdout).strip()[-500:]}
    out: dict[str, Any] = {"transactions": tx, "wall_s": round(wall, 3), "rows_per_s": round(n / wall, 1)}
    for line in proc.stdout.splitlines():
        if line.startswith("latency average"):
            out["latency_ms"] = float(line.split("=")[1].split()[0])
    if pg0 is not None and pg1 is not None:
        out["postgres_cpu_ms_per_row"] = round(1000 * (pg1 - pg0) / n, 4)
    return out


def stages(database: Database, args: argparse.Namespace, n: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for variant in ("raw", "cronbox"):
        load(database, n, None)
        res = {stage: pgbench_stage(database, f"{variant}_{stage}.sql", n, args.batch)
               for stage in ("dispatch", "deliver", "complete")}
        res["check"] = outcome(database, n)["complete_and_unique"]
        secs = [r.get("wall_s") for r in res.values() if isinstance(r, dict) and r.get("wall_s")]
        res["serial_rows_per_s"] = round(n / sum(secs), 1) if len(secs) == 3 else None
        out[variant] = res
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="cronbox: the raw SQL limit of the throughput bench, repeated")
    p.add_argument("-n", "--runs", type=int, help="rows per repetition (default 200,000; quick 20,000)")
    p.add_argument("--reps", type=int, help="repetitions (default 5; quick 2)")
    p.add_argument("--batch", type=int, default=1000)
    args = parse_args(p, argv)
    n = args.runs or (20_000 if args.quick else 200_000)
    reps = args.reps or (2 if args.quick else 5)
    with Database(args, "rawlimit") as database:
        report = base_report("rawlimit", args, database, argv)
        install_raw(database)
        results = []
        for i in range(reps):
            res = run_raw(database, args, n)
            log(f"rep {i + 1}/{reps}: {res['runs_per_s']} runs/s, complete {res['complete_and_unique']}")
            results.append(res)
    rates = [r["runs_per_s"] or 0.0 for r in results]
    median = statistics.median(rates)
    stalled = [i + 1 for i, r in enumerate(rates) if r < median / 2]
    complete = all(r["complete_and_unique"] for r in results)
    report.update({"n": n, "reps": reps, "repetitions": results, "runs_per_s": rates, "median_runs_per_s": median,
                   "stalled_repetitions": stalled, "complete": complete})
    emit(args, report, [f"rawlimit: {n} rows x {reps}, batch {args.batch}: median {median} runs/s "
                        f"(min {min(rates)}, max {max(rates)}); stalled reps {stalled or 'none'}; complete {complete}"])
    return 0 if complete and not stalled else 1


if __name__ == "__main__":
    sys.exit(main())
