"""bench/peers: cronbox next to PgQueuer, on the same cluster, interleaved, in one run.

Each repetition runs, one after the other on the same private durable cluster:

  pgqueuer_b10   PgQueuer 1.6 drain: N jobs enqueued first, then --pgq-workers worker
                 processes (one QueueManager each, asyncpg, a no-op entrypoint) at batch 10
  pgqueuer_b100  the same at batch 100
  cronbox_push   N runs due now -> poller dispatch -> relay -> HTTP batches -> the bench worker
                 answers with the outcome -> completed (bench.throughput's pipeline)
  cronbox_pull   N runs due now -> poller dispatch -> pull workers claim_runs + complete_runs
  raw_sql        the same N runs through bench/raw.sql's three SQL procedures: cronbox's row
                 work (futures -> run + outbox; outbox claimed, deleted, run delivered; run
                 succeeded) with no Python, no job statistics and no leases (bench.rawlimit).
                 Not a ceiling: its three polling loops spend about as much server CPU per run
                 as cronbox does; the floor of that row work is bench.sqlcost's
                 `raw` flow, one statement after another

Each figure is N divided by the span from the first job taken (run dispatched) to the last one
done, so start-up and load are not counted for anyone. cronbox runs here with no early dispatch
(CRONBOX_DISPATCH_LEAD=0 and CRONBOX_DISPATCH_LEAD_MAX=0 unless --env says otherwise): with its
default lead the poller writes part of a burst's runs before their due time (half of 100,000 in
one run), and their dispatched_at is the due time, so that work fell before the span and the
rate came out higher than the drain it stands for. Without a lead every run is dispatched
inside the span, as every PgQueuer job is taken inside its own. Ratios are cronbox / PgQueuer batch 100
per repetition (measured under the same noise), then the median. Each system's CPU per job is
measured too (the server's, and its client processes': PgQueuer's workers from their first job
to their last, cronbox's poller, relay and workers), and PgQueuer's total over cronbox's: when
both keep every core busy (on this machine they do), the rate ratio comes to that CPU ratio, so
it says how much CPU per run cronbox must shed for a target ratio. PgQueuer does less per job (no schedule, no history row at
dispatch, no HTTP); the comparison is what a user weighing a scheduler on PostgreSQL sees.
Needs the `bench` extra: `pip install -e '.[bench]'`.

    python -m bench.peers                 # N = 200,000, 3 repetitions
    python -m bench.peers --quick         # N = 2,000, 1 repetition
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import Database, Fleet, base_report, emit, log, parse_args, postgres_cpu, wait_until, workdir
from bench.pipeline import reset
from bench.rawlimit import install_raw, run_raw
from bench.throughput import run_cronbox, run_pull

PGQ_ENTRYPOINT = "bench"


async def _pgq_call(dsn: str, what: str, n: int = 0) -> Any:
    import asyncpg
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.queries import Queries

    conn = await asyncpg.connect(dsn)
    try:
        q = Queries(AsyncpgDriver(conn))
        if what == "install":
            if not await q.has_table("pgqueuer"):
                await q.install()
            return None
        if what == "load":
            await conn.execute("TRUNCATE pgqueuer, pgqueuer_log")
            for start in range(0, n, 10_000):
                k = min(10_000, n - start)
                await q.enqueue([PGQ_ENTRYPOINT] * k, [None] * k, [0] * k)
            await conn.execute("ANALYZE pgqueuer")
            return await conn.fetchval("SELECT count(*) FROM pgqueuer")
        if what == "left":
            return await conn.fetchval("SELECT count(*) FROM pgqueuer")
        raise ValueError(what)
    finally:
        await conn.close()


def pgqueuer_available() -> str | None:
    try:
        import asyncpg  # noqa: F401
        import pgqueuer  # noqa: F401
    except ImportError as exc:
        return f"PgQueuer is not installed ({exc.name}): pip install -e '.[bench]'"
    return None


def cpu_per_job(cpu_s: dict[str, float] | None, n: int) -> dict[str, float] | None:
    """CPU µs per job: the server's, the client processes' (workers, poller, relay) and the sum.
    On a machine whose cores are all busy, the rates of two systems cannot differ by more than
    the inverse ratio of their totals."""
    if not cpu_s or cpu_s.get("postgres") is None:
        return None
    server = cpu_s["postgres"]
    clients = sum(v for k, v in cpu_s.items() if k != "postgres")
    return {"postgres": round(1e6 * server / n, 1), "clients": round(1e6 * clients / n, 1),
            "total": round(1e6 * (server + clients) / n, 1)}


NO_EARLY_DISPATCH = ("CRONBOX_DISPATCH_LEAD", "CRONBOX_DISPATCH_LEAD_MAX")


def run_pgqueuer(database: Database, n: int, batch: int, workers: int, logdir: Path) -> dict[str, Any]:
    loaded = asyncio.run(_pgq_call(database.dsn, "load", n))
    if loaded != n:
        return {"error": f"enqueued {loaded}, not {n}"}
    pg0 = postgres_cpu(database.postmaster)
    with Fleet(logdir) as fleet:
        procs = [fleet.python(f"pgq{batch}_{i}", "bench.pgq_worker", database.dsn, "--batch", str(batch))
                 for i in range(workers)]
        wait_until(lambda: all(not p.alive() for p in procs), 120 + n / 200, f"PgQueuer batch {batch} to drain")
        reports = []
        for p in procs:
            lines = [ln for ln in p.tail(20_000).splitlines() if ln.startswith("{")]
            if p.popen.returncode != 0 or not lines:
                return {"error": f"{p.name} exited with {p.popen.returncode}: {p.tail(1500)}"}
            reports.append(json.loads(lines[-1]))
    pg1 = postgres_cpu(database.postmaster)
    left = asyncio.run(_pgq_call(database.dsn, "left"))
    jobs = sum(r["jobs"] for r in reports)
    firsts = [r["first"] for r in reports if r["first"]]
    lasts = [r["last"] for r in reports if r["last"]]
    span = max(lasts) - min(firsts) if firsts else 0.0
    # The workers' CPU from their first job to their last (start-up and imports left out); the
    # server's over the whole drain (its idle start-up costs next to nothing).
    cpu_s = {"workers": sum((r.get("cpu_last") or 0.0) - (r.get("cpu_first") or 0.0) for r in reports)}
    if pg0 is not None and pg1 is not None:
        cpu_s["postgres"] = pg1 - pg0
    return {"jobs": jobs, "left_in_queue": left, "complete": jobs == n and left == 0, "span_s": round(span, 3),
            "runs_per_s": round(n / span, 1) if span else None, "workers": workers, "batch": batch,
            "per_worker_jobs": [r["jobs"] for r in reports], "cpu_us_per_job": cpu_per_job(cpu_s, n)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="cronbox push and pull vs PgQueuer's drain, same cluster, same run")
    p.add_argument("-n", "--runs", type=int, help="jobs/runs per system per repetition (default 200,000; quick 2,000)")
    p.add_argument("--reps", type=int, help="repetitions (default 3; quick 1)")
    p.add_argument("--pgq-workers", type=int, default=5, help="PgQueuer worker processes (default 5)")
    p.add_argument("--batch", type=int, default=1000, help="cronbox dispatch, relay and pull batch size")
    p.add_argument("--http-batch", type=int, default=100, help="cronbox messages per HTTP request (default 100)")
    p.add_argument("--pull-workers", type=int, default=2)
    p.add_argument("--pollers", type=int, default=1, help="cronbox poller processes (dispatch streams)")
    args = parse_args(p, argv)
    args.report_tx = "batch"
    # a drain from the due time, as PgQueuer's from its first job (the docstring says why)
    given = {item.partition("=")[0] for item in args.env}
    args.env = [f"{name}=0" for name in NO_EARLY_DISPATCH if name not in given] + list(args.env)
    n = args.runs or (2000 if args.quick else 200_000)
    reps = args.reps or (1 if args.quick else 3)
    missing = pgqueuer_available()
    if missing:
        print(missing, file=sys.stderr)
        return 2
    systems = ("pgqueuer_b10", "pgqueuer_b100", "cronbox_push", "cronbox_pull", "raw_sql")
    with Database(args, "peers") as database, workdir("peers") as logdir:
        asyncio.run(_pgq_call(database.dsn, "install"))
        install_raw(database)
        report = base_report("peers", args, database, argv)
        report.update({"n": n, "reps": reps, "pgq_workers": args.pgq_workers, "batch": args.batch, "pollers": args.pollers,
                       "http_batch": args.http_batch, "repetitions": []})
        for r in range(reps):
            rep: dict[str, Any] = {}
            for system in systems:
                log(f"rep {r + 1}/{reps}: {system}, {n}")
                t0 = time.monotonic()
                if system.startswith("pgqueuer"):
                    rep[system] = run_pgqueuer(database, n, int(system.removeprefix("pgqueuer_b")),
                                               args.pgq_workers, logdir)
                elif system == "cronbox_push":
                    res = run_cronbox(database, args, n, "respond", logdir)
                    rep[system] = {"runs_per_s": res["runs_per_s"], "complete": res["complete_and_unique"],
                                   "span_s": res["span_s"], "cpu_us_per_job": cpu_per_job(res.get("cpu_s"), n),
                                   "dispatched_before_due": res.get("dispatched_before_due")}
                elif system == "raw_sql":
                    res = run_raw(database, args, n)
                    rep[system] = {"runs_per_s": res.get("runs_per_s"), "complete": res.get("complete_and_unique"),
                                   "span_s": res.get("span_s"), "cpu_us_per_job": cpu_per_job(res.get("cpu_s"), n)}
                    reset(database)
                else:
                    res = run_pull(database, args, n, logdir)
                    rep[system] = {"runs_per_s": res.get("runs_per_s"), "complete": res.get("complete_and_unique"),
                                   "span_s": res.get("span_s"), "error": res.get("error"),
                                   "cpu_us_per_job": cpu_per_job(res.get("cpu_s"), n),
                                   "dispatched_before_due": res.get("dispatched_before_due")}
                    reset(database)
                log(f"  {rep[system].get('runs_per_s')} per s ({time.monotonic() - t0:.0f} s)")
            base = rep["pgqueuer_b100"].get("runs_per_s")
            rep["ratio_push_to_pgq_b100"] = round(rep["cronbox_push"]["runs_per_s"] / base, 3) \
                if base and rep["cronbox_push"].get("runs_per_s") else None
            rep["ratio_pull_to_pgq_b100"] = round(rep["cronbox_pull"]["runs_per_s"] / base, 3) \
                if base and rep["cronbox_pull"].get("runs_per_s") else None
            rep["ratio_raw_to_pgq_b100"] = round(rep["raw_sql"]["runs_per_s"] / base, 3) \
                if base and rep["raw_sql"].get("runs_per_s") else None
            # PgQueuer's CPU per job over cronbox's: what the rate ratio comes to when both keep
            # every core busy (a system that spends twice the CPU per job runs at half the rate
            # on the same saturated cores).
            pgq_cpu = (rep["pgqueuer_b100"].get("cpu_us_per_job") or {}).get("total")
            for flow in ("push", "pull"):
                own = (rep[f"cronbox_{flow}"].get("cpu_us_per_job") or {}).get("total")
                rep[f"cpu_ratio_pgq_b100_to_{flow}"] = round(pgq_cpu / own, 3) if pgq_cpu and own else None
            report["repetitions"].append(rep)
    reps_ = report["repetitions"]
    report["median_per_s"] = {s: statistics.median([x[s]["runs_per_s"] or 0.0 for x in reps_]) for s in systems}
    report["median_cpu_us_per_job"] = {
        s: {part: statistics.median(vals) for part in ("postgres", "clients", "total")
            if (vals := [c[part] for x in reps_ if (c := x[s].get("cpu_us_per_job"))])}
        for s in systems}
    for key in ("ratio_push_to_pgq_b100", "ratio_pull_to_pgq_b100", "ratio_raw_to_pgq_b100",
                "cpu_ratio_pgq_b100_to_push", "cpu_ratio_pgq_b100_to_pull"):
        vals = [x[key] for x in reps_ if x[key] is not None]
        report[key] = {"median": statistics.median(vals) if vals else None, "all": vals}
    report["complete"] = all(x[s].get("complete") for x in reps_ for s in systems)
    med = report["median_per_s"]
    cpu = report["median_cpu_us_per_job"]
    summary = [f"peers: {n} per system x {reps} reps, {'durable' if report['durable'] else 'NOT durable'}, "
               f"PgQueuer {args.pgq_workers} workers, cronbox batch {args.batch} / HTTP batch {args.http_batch}",
               *[f"  {s:14} median {med[s]:>9} per s   all {[x[s]['runs_per_s'] for x in reps_]}" for s in systems],
               f"  cronbox push / PgQueuer b100: median {report['ratio_push_to_pgq_b100']['median']} "
               f"{report['ratio_push_to_pgq_b100']['all']} (target >= 2)",
               f"  cronbox pull / PgQueuer b100: median {report['ratio_pull_to_pgq_b100']['median']} "
               f"{report['ratio_pull_to_pgq_b100']['all']} (target >= 2)",
               f"  raw SQL (the same row work, no Python) / PgQueuer b100: median "
               f"{report['ratio_raw_to_pgq_b100']['median']} {report['ratio_raw_to_pgq_b100']['all']}",
               "  CPU us per job, median (postgres + clients = total): " + "; ".join(
                   f"{s} {c['postgres']:.0f} + {c['clients']:.0f} = {c['total']:.0f}"
                   for s in systems if (c := cpu[s]) and "total" in c and "clients" in c),
               f"  CPU per job, PgQueuer b100 / cronbox (the rate ratio on saturated cores): "
               f"push {report['cpu_ratio_pgq_b100_to_push']['median']} {report['cpu_ratio_pgq_b100_to_push']['all']}, "
               f"pull {report['cpu_ratio_pgq_b100_to_pull']['median']} {report['cpu_ratio_pgq_b100_to_pull']['all']}",
               "  cronbox runs dispatched before their due time (outside the span, inside the CPU): push "
               f"{[x['cronbox_push'].get('dispatched_before_due') for x in reps_]}, "
               f"pull {[x['cronbox_pull'].get('dispatched_before_due') for x in reps_]}",
               f"  every job and run done once, nothing left: {report['complete']}"]
    emit(args, report, summary)
    return 0 if report["complete"] else 1


if __name__ == "__main__":
    sys.exit(main())
