"""bench/worker_kit: what the worker kit costs in pull mode, against the hand-written worker.

Each repetition loads N runs due at once (bench/pipeline.py `load`). Default `--mode drain`:
`cronbox poller` (sinks `*=postgres`) dispatches them all into the outbox and stops, then W
pull workers drain it: runs/s = N / (last finished_at - first started_at), the workers'
span by the database clock, so the poller's dispatch rate does not hide the worker's cost.
`--mode pipeline`: poller and workers together, runs/s = N / (last finished_at - first
dispatched_at). Two variants per repetition, in alternating order, on
the same database: `hand` (bench/pull_worker.py: claim_runs + complete_runs in a loop) and
`kit` (`cronbox worker bench.kit_worker:worker`, a no-op async handler, concurrency and
batch = --batch). The headline is kit / hand per repetition (same noise), median over reps; the workers' CPU microseconds per run are reported too.

  python -m bench.worker_kit                  # N=100,000, 3 repetitions, W=2, batch 1,000
  python -m bench.worker_kit --quick          # N=2,000, 1 repetition
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import Database, Fleet, base_report, emit, extra_env, log, parse_args, spread, wait_until, workdir
from bench.common import Process, process_env
from bench.pipeline import load, outcome, wait_done


def start_workers(fleet: Fleet, database: Database, args: argparse.Namespace, variant: str, logdir: Path) -> None:
    for i in range(args.workers):
        name = f"{variant}{i}"
        if variant == "hand":
            fleet.python(name, "bench.pull_worker", database.dsn, "--batch", str(args.batch))
        else:
            kit_env = {"CRONBOX_WORKER_CONCURRENCY": str(args.batch), "CRONBOX_WORKER_BATCH": str(args.batch),
                       "CRONBOX_POLL_INTERVAL": "10ms"}
            fleet.procs[name] = Process(name, [sys.executable, "-m", "cronbox", "worker", "bench.kit_worker:worker"],
                                        process_env(database.dsn, kit_env), logdir)


def run_variant(database: Database, args: argparse.Namespace, n: int, variant: str, logdir: Path) -> dict[str, Any]:
    """drain: N runs dispatched first (poller stopped), then the workers alone, timed from the
    first claim to the last completion; pipeline: poller and workers together, N due at once."""
    env = {"CRONBOX_DISPATCH_BATCH": str(args.batch), "CRONBOX_SINKS": "*=postgres", **extra_env(args)}
    with Fleet(logdir) as fleet:
        fleet.cronbox("poller", database.dsn, env)
        if args.mode == "drain":
            load(database, n, None)
            wait_until(lambda: database.scalar("SELECT count(*) FROM cronbox.outbox") == n
                       and not database.scalar("SELECT EXISTS (SELECT 1 FROM cronbox.job_future)"),
                       120 + n / 500, "every run dispatched")
            fleet.stop("poller")
            start_workers(fleet, database, args, variant, logdir)
        else:
            start_workers(fleet, database, args, variant, logdir)
            due = load(database, n, 2.0 + n / 40000)
            while time.time() < due - 0.3:
                fleet.check_alive()
                time.sleep(0.05)
        cpu0 = fleet.cpu()
        wait_done(database, n, fleet, timeout=120 + n / 200)
        cpu1 = fleet.cpu()
        res = outcome(database, n)
        if args.mode == "drain":  # the workers' span: first claim to last completion
            span = database.scalar("SELECT extract(epoch FROM max(finished_at) - min(started_at))::float8 FROM cronbox.runs")
            res["span_s"], res["runs_per_s"] = round(span, 3), round(n / span, 1)
        res["worker_cpu_s"] = round(sum(cpu1[k] - cpu0.get(k, 0.0) for k in cpu1 if k.startswith(variant)), 2)
        res["worker_cpu_us_per_run"] = round(res["worker_cpu_s"] / n * 1e6, 1)
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="worker kit vs hand-written pull worker")
    p.add_argument("-n", "--runs", type=int, help="runs per variant and repetition (default 100,000; quick 2,000)")
    p.add_argument("--reps", type=int, help="repetitions (default 3; quick 1)")
    p.add_argument("--batch", type=int, default=1000, help="claim batch (and kit concurrency)")
    p.add_argument("--workers", type=int, default=2, help="worker processes per variant")
    p.add_argument("--mode", choices=("drain", "pipeline"), default="drain",
                   help="drain: runs dispatched first, workers timed alone (default); pipeline: with the poller")
    args = parse_args(p, argv)
    n = args.runs or (2000 if args.quick else 100_000)
    reps = args.reps or (1 if args.quick else 3)
    with Database(args, "worker_kit") as database, workdir("worker_kit") as logdir:
        report = base_report("worker_kit", args, database, argv)
        report.update({"n": n, "reps": reps, "batch": args.batch, "workers": args.workers, "mode": args.mode,
                       "reps_detail": []})
        ratios: list[float] = []
        per: dict[str, list[float]] = {"hand": [], "kit": []}
        for rep in range(reps):
            order = ["hand", "kit"] if rep % 2 == 0 else ["kit", "hand"]
            detail: dict[str, Any] = {}
            for variant in order:
                res = run_variant(database, args, n, variant, logdir)
                log(f"rep {rep + 1} {variant}: {res['runs_per_s']} runs/s, complete={res['complete_and_unique']}")
                detail[variant] = res
                if res["runs_per_s"]:
                    per[variant].append(res["runs_per_s"])
            report["reps_detail"].append(detail)
            if detail["hand"]["runs_per_s"] and detail["kit"]["runs_per_s"]:
                ratios.append(detail["kit"]["runs_per_s"] / detail["hand"]["runs_per_s"])
        report["hand_runs_per_s"] = spread(per["hand"])
        report["kit_runs_per_s"] = spread(per["kit"])
        report["kit_over_hand"] = spread(ratios)
        ok = all(d[v]["complete_and_unique"] for d in report["reps_detail"] for v in d)
        report["complete_and_unique"] = ok
        median = statistics.median(ratios) if ratios else None
        emit(args, report, [f"worker kit / hand-written pull worker: median {median and round(median, 3)} "
                            f"over {len(ratios)} rep(s); every run complete and unique: {ok}"])
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
