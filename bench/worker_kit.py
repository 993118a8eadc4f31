"""bench/worker_kit: what the worker kit costs in pull mode, against the hand-written worker.

Each repetition loads N runs due at once (bench/pipeline.py `load`), starts `cronbox poller`
(sinks `*=postgres`) and W pull workers, and measures runs/s = N / (last finished_at - first
dispatched_at) by the database clock. Two variants per repetition, in alternating order, on
the same database: `hand` (bench/pull_worker.py: claim_runs + complete_runs in a loop) and
`kit` (`cronbox worker bench.kit_worker:worker`, a no-op async handler, concurrency and
batch = --batch). The headline is kit / hand per repetition (same noise), median over reps.

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

from bench.common import Database, Fleet, base_report, emit, extra_env, log, parse_args, spread, workdir
from bench.common import Process, process_env
from bench.pipeline import load, outcome, wait_done


def run_variant(database: Database, args: argparse.Namespace, n: int, variant: str, logdir: Path) -> dict[str, Any]:
    env = {"CRONBOX_DISPATCH_BATCH": str(args.batch), "CRONBOX_SINKS": "*=postgres", **extra_env(args)}
    margin = 2.0 + n / 40000
    with Fleet(logdir) as fleet:
        fleet.cronbox("poller", database.dsn, env)
        for i in range(args.workers):
            name = f"{variant}{i}"
            if variant == "hand":
                fleet.python(name, "bench.pull_worker", database.dsn, "--batch", str(args.batch))
            else:
                kit_env = {"CRONBOX_WORKER_CONCURRENCY": str(args.batch), "CRONBOX_WORKER_BATCH": str(args.batch),
                           "CRONBOX_POLL_INTERVAL": "10ms"}
                fleet.procs[name] = Process(name, [sys.executable, "-m", "cronbox", "worker", "bench.kit_worker:worker"],
                                            process_env(database.dsn, kit_env), logdir)
        due = load(database, n, margin)
        while time.time() < due - 0.3:
            fleet.check_alive()
            time.sleep(0.05)
        cpu0 = fleet.cpu()
        wait_done(database, n, fleet, timeout=120 + n / 200)
        cpu1 = fleet.cpu()
        res = outcome(database, n)
        res["worker_cpu_s"] = round(sum(cpu1[k] - cpu0[k] for k in cpu1 if k.startswith(variant)), 2)
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="worker kit vs hand-written pull worker")
    p.add_argument("-n", "--runs", type=int, help="runs per variant and repetition (default 100,000; quick 2,000)")
    p.add_argument("--reps", type=int, help="repetitions (default 3; quick 1)")
    p.add_argument("--batch", type=int, default=1000, help="claim batch (and kit concurrency)")
    p.add_argument("--workers", type=int, default=2, help="worker processes per variant")
    args = parse_args(p, argv)
    n = args.runs or (2000 if args.quick else 100_000)
    reps = args.reps or (1 if args.quick else 3)
    with Database(args, "worker_kit") as database, workdir("worker_kit") as logdir:
        report = base_report("worker_kit", args, database, argv)
        report.update({"n": n, "reps": reps, "batch": args.batch, "workers": args.workers, "reps_detail": []})
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
