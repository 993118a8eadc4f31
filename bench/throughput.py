"""bench/throughput: N runs due now through the real pipeline, against the raw SQL limit.

Each repetition, on one database:
  1. cronbox: N one-off jobs, each with one future due at T0 (loaded set-based, as saturation
     would leave them), then the real `cronbox poller` and `cronbox relay` processes deliver
     them over HTTP to the bench worker (bench/worker.py, its own process), which completes
     them; done when every run is `succeeded`.
  2. raw: the same N rows, the same row work (futures -> run + outbox; claim + delete outbox
     + mark delivered; mark succeeded) by three SQL procedures (bench/raw.sql) running at
     once, one commit per batch of the same size, no Python in the path.
runs/s = N / (last finished_at - first dispatched_at), both from the database clock; the
headline is cronbox / raw, taken per repetition (both measured under the same noise).
Then, once: the pull-mode variant (cronbox.claim_runs workers) if the function exists, and
a stage breakdown with pgbench (each stage alone, raw statement vs cronbox function).

  python -m bench.throughput                    # N=200,000, 3 repetitions, durable
  python -m bench.throughput --quick            # N=2,000, 1 repetition (the test suite)
  python -m bench.throughput --mode respond --env CRONBOX_RELAY_BATCH=1000 --profile
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


from bench.common import (
    Database, Fleet, base_report, cpu_delta, emit, extra_env, log, parse_args, per_run,
    postgres_cpu, py_spy, py_spy_collect, py_spy_record, spread, wait_until, workdir,
)
from bench.database import WaitSampler
from bench.pipeline import load, outcome, progress, reset, until_due, wait_done, wait_worker, worker_stats
from bench.rawlimit import install_raw, run_raw, stages
from cronbox.pgcluster import free_port

HOT = ["cronbox.job", "cronbox.job_future", "cronbox.outbox", "cronbox.run"]


# --------------------------------------------------------------------------- cronbox pipeline

def start_pollers(fleet: Fleet, database: Database, args: argparse.Namespace, env: dict[str, str]) -> None:
    """`--pollers` (1) poller processes: each its own dispatch loop, one serial stream of ticks."""
    for i in range(getattr(args, "pollers", 1)):
        fleet.cronbox("poller", database.dsn, env, name="poller" if i == 0 else f"poller{i}")


def run_cronbox(database: Database, args: argparse.Namespace, n: int, mode: str, logdir: Path,
                profile: bool = False) -> dict[str, Any]:
    port = free_port()
    env = {"CRONBOX_DISPATCH_BATCH": str(args.batch), "CRONBOX_RELAY_BATCH": str(args.batch),
           "CRONBOX_SINKS": f"*=http://127.0.0.1:{port}/run batch={args.http_batch}", **extra_env(args)}
    margin = 2.0 + n / 40000
    with Fleet(logdir) as fleet:
        fleet.worker(database.dsn, port, mode, "--report-tx", args.report_tx, "--report-batch",
                     str(args.batch if args.report_tx == "batch" else 50))
        wait_worker(port, fleet)
        start_pollers(fleet, database, args, env)
        fleet.cronbox("relay", database.dsn, env)
        if profile:
            # From before the jobs exist: their fires are one-off `allow` jobs, which the poller
            # dispatches early (within its lead, before the due time), so a reset at the due
            # time would leave dispatch out of the profile.
            database.reset_statements()
        due = load(database, n, margin)
        # CPU and counters from the end of the load, as PgQueuer's (bench.peers): the poller
        # dispatches part of the runs before their due time, outside the span, not outside the CPU
        cpu0, pg0, c0 = fleet.cpu(), postgres_cpu(database.postmaster), database.counters()
        early = until_due(database, fleet, due)
        spies: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
        if profile:
            for name, proc in fleet.procs.items():
                out = logdir / f"pyspy-{name}.txt"
                sp = py_spy_record(proc.pid, 3600, out)
                if sp is not None:
                    spies[name] = (sp, out)
        with WaitSampler(database, interval=0.1 if profile else 0.5) as waits:
            wait_done(database, n, fleet, timeout=120 + n / 200)
        cpu1, pg1, c1 = fleet.cpu(), postgres_cpu(database.postmaster), database.counters()
        stats = worker_stats(port)
        rss = fleet.rss()
        res = outcome(database, n)
        if spies:
            res["py_spy"] = py_spy_collect(spies)
        res["wall_from_due_s"] = round(time.time() - due, 2)
        res["dispatched_before_due"] = early
        res["cpu_s"] = cpu_delta(cpu0, cpu1)
        if pg0 is not None and pg1 is not None:
            res["cpu_s"]["postgres"] = round(pg1 - pg0, 2)
        res["cpu_ms_per_run"] = {k: round(1000 * v / n, 4) for k, v in res["cpu_s"].items()}
        res["per_run"] = per_run(c0, c1, n)
        res["worker"] = stats
        res["rss_mb"] = rss
        res["server_waits"] = waits.top(8 if not profile else 15)
        if profile:
            res["statements"] = database.top_statements()
    return res


def probe_respond(database: Database, args: argparse.Namespace, logdir: Path) -> dict[str, Any]:
    """Does the installed relay complete runs from the worker's answer? Try with 50 runs."""
    n = 50
    port = free_port()
    env = {"CRONBOX_SINKS": f"*=http://127.0.0.1:{port}/run", **extra_env(args)}
    with Fleet(logdir) as fleet:
        fleet.worker(database.dsn, port, "respond")
        wait_worker(port, fleet)
        fleet.cronbox("poller", database.dsn, env)
        fleet.cronbox("relay", database.dsn, env)
        load(database, n, None)
        # Once the outbox is empty every answer has been acked; a relay that completes runs
        # from the answer did so in the ack's transaction.
        try:
            wait_until(lambda: progress(database)[:2] == (0, 0) and database.scalar(
                "SELECT count(*) FROM cronbox.runs") == n, 20, "respond probe deliveries")
            delivered = True
        except TimeoutError:
            delivered = False
        ok = delivered and database.scalar("SELECT count(*) FROM cronbox.runs WHERE state = 'succeeded'") == n
        stats = worker_stats(port)
    reset(database)
    return {"supported": ok, "delivered": delivered, "delivered_messages": stats["messages"], "array_requests": stats["array_requests"]}


# --------------------------------------------------------------------------- pull mode

def run_pull(database: Database, args: argparse.Namespace, n: int, logdir: Path) -> dict[str, Any]:
    if not database.has_function("claim_runs"):
        return {"available": False, "reason": "cronbox.claim_runs does not exist in the installed schema"}
    env = {"CRONBOX_DISPATCH_BATCH": str(args.batch), "CRONBOX_SINKS": "*=postgres", **extra_env(args)}
    margin = 2.0 + n / 40000
    with Fleet(logdir) as fleet:
        start_pollers(fleet, database, args, env)
        for i in range(args.pull_workers):
            fleet.python(f"pull{i}", "bench.pull_worker", database.dsn, "--batch", str(args.batch))
        due = load(database, n, margin)
        cpu0, pg0 = fleet.cpu(), postgres_cpu(database.postmaster)  # from the end of the load (above)
        early = until_due(database, fleet, due)
        try:
            wait_done(database, n, fleet, timeout=120 + n / 200)
        except (TimeoutError, RuntimeError) as exc:
            return {"available": True, "error": str(exc)[:1000]}
        cpu1, pg1 = fleet.cpu(), postgres_cpu(database.postmaster)
        res = {"available": True, **outcome(database, n), "cpu_s": cpu_delta(cpu0, cpu1),
               "dispatched_before_due": early}
        if pg0 is not None and pg1 is not None:
            res["cpu_s"]["postgres"] = round(pg1 - pg0, 2)
    return res


# --------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="cronbox throughput vs the raw SQL limit")
    p.add_argument("-n", "--runs", type=int, help="runs per repetition (default 200,000; quick 2,000)")
    p.add_argument("--reps", type=int, help="repetitions (default 3; quick 1)")
    p.add_argument("--batch", type=int, default=1000, help="dispatch, relay, report and raw batch size")
    p.add_argument("--http-batch", type=int, default=200,
                   help="messages per HTTP request (the route's batch=N; 1 = one POST per message)")
    p.add_argument("--mode", choices=("auto", "report-sql", "respond"), default="auto",
                   help="worker side: report-sql (worker calls complete_run), respond (worker answers with "
                        "the outcome; needs relay support), auto (respond if the installed relay supports it)")
    p.add_argument("--report-tx", choices=("per-run", "batch"), default="per-run",
                   help="report-sql worker: a transaction per run (default) or per batch (see bench/worker.py)")
    p.add_argument("--pull-workers", type=int, default=2)
    p.add_argument("--pollers", type=int, default=1, help="poller processes (dispatch streams), push and pull")
    p.add_argument("--no-pull", action="store_true")
    p.add_argument("--no-stages", action="store_true", help="skip the pgbench stage breakdown")
    p.add_argument("--profile", action="store_true",
                   help="one more cronbox repetition under py-spy and pg_stat_statements(track=all)")
    args = parse_args(p, argv)
    n = args.runs or (2000 if args.quick else 200_000)
    reps = args.reps or (1 if args.quick else 3)

    with Database(args, "throughput") as database, workdir("throughput", keep=args.keep) as logdir:
        install_raw(database)
        report = base_report("throughput", args, database, argv)
        report.update({"n": n, "batch": args.batch, "reps": reps, "report_tx": args.report_tx})
        mode = args.mode
        if mode in ("auto", "respond"):
            log("probing whether the relay completes runs from the worker's answer")
            probe = probe_respond(database, args, logdir)
            report["respond_probe"] = probe
            if mode == "respond" and not probe["supported"]:
                report["error"] = "mode respond: the installed relay does not complete runs from the worker's answer"
                emit(args, report, [report["error"]])
                return 3
            mode = "respond" if probe["supported"] else "report-sql"
        report["mode"] = mode
        database.set_statement_tracking("top")
        results: list[dict[str, Any]] = []
        for r in range(reps):
            log(f"rep {r + 1}/{reps}: cronbox pipeline, {n} runs, mode {mode}")
            cb = run_cronbox(database, args, n, mode, logdir)
            log(f"  cronbox {cb['runs_per_s']} runs/s; raw SQL pipeline")
            raw = run_raw(database, args, n)
            ratio = round(cb["runs_per_s"] / raw["runs_per_s"], 3) if cb["runs_per_s"] and raw["runs_per_s"] else None
            log(f"  raw {raw['runs_per_s']} runs/s; ratio {ratio}")
            results.append({"cronbox": cb, "raw": raw, "ratio": ratio})
        report["repetitions"] = results
        report["cronbox_runs_per_s"] = spread([x["cronbox"]["runs_per_s"] for x in results if x["cronbox"]["runs_per_s"]])
        report["raw_runs_per_s"] = spread([x["raw"]["runs_per_s"] for x in results if x["raw"]["runs_per_s"]])
        report["ratio"] = spread([x["ratio"] for x in results if x["ratio"] is not None])
        report["all_complete_and_unique"] = all(
            x["cronbox"]["complete_and_unique"] and x["raw"]["complete_and_unique"] for x in results)
        if not args.no_pull:
            log("pull mode")
            report["pull"] = run_pull(database, args, n, logdir)
        if not args.no_stages:
            log("stage breakdown (pgbench, each stage alone)")
            report["stages"] = stages(database, args, n)
        if args.profile:
            log("profile repetition (py-spy + pg_stat_statements track=all)")
            database.set_statement_tracking("all")
            report["profile"] = run_cronbox(database, args, n, mode, logdir, profile=True)
            report["profile"]["py_spy_available"] = py_spy() is not None
            database.set_statement_tracking("top")
        report["sizes_after"] = database.table_sizes(HOT)
    emit(args, report, summary(report))
    return 0 if report["all_complete_and_unique"] else 1


def summary(r: dict[str, Any]) -> list[str]:
    cb, raw, ratio = r["cronbox_runs_per_s"], r["raw_runs_per_s"], r["ratio"]
    lines = [f"throughput: {r['n']} runs x {r['reps']} reps, batch {r['batch']}, mode {r['mode']}, "
             f"{'durable' if r['durable'] else 'NOT durable'}",
             f"  cronbox  median {cb['median']} runs/s (min {cb['min']}, max {cb['max']})",
             f"  raw SQL  median {raw['median']} runs/s (min {raw['min']}, max {raw['max']})",
             f"  cronbox/raw median {ratio['median']} (min {ratio['min']}, max {ratio['max']})",
             f"  complete and unique: {r['all_complete_and_unique']}"]
    last = r["repetitions"][-1]["cronbox"]
    lines.append(f"  CPU ms/run (last rep): {last.get('cpu_ms_per_run')}")
    lines.append(f"  worker: {last['worker'].get('requests')} requests, {last['worker'].get('messages')} messages, "
                 f"{last['worker'].get('array_requests')} batched")
    if "pull" in r:
        pull = r["pull"]
        lines.append(f"  pull mode: {pull.get('runs_per_s') if pull.get('available') else 'not available'}"
                     f"{' ' + pull['error'] if pull.get('error') else ''}")
    if "stages" in r:
        for v, st in r["stages"].items():
            lines.append("  stages " + v + ": " + ", ".join(
                f"{s} {st[s].get('rows_per_s')} rows/s" for s in ("dispatch", "deliver", "complete")))
    return lines


if __name__ == "__main__":
    sys.exit(main())
