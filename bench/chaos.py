"""Chaos on durable settings: a steady load of jobs firing every second across several queues,
HTTP workers recording every delivery, two or more pollers and relays as real processes, and
faults on a seeded random plan: SIGKILLs of pollers and relays (restarted at once), crash
restarts of PostgreSQL (`pg_ctl stop -m immediate` + start: recovery replays WAL), rounds of
pg_terminate_backend, and a worker killed with runs in flight (they complete through SQL, so
their leases expire and the reaper retries them).

At the end, from the tables and the workers' own records: every expected fire dispatched
exactly once (or recorded missed), every dispatched run final or still legitimately leased,
deliveries duplicated only with the same idempotency key, no orphan outbox rows; and each
fault's recovery time (first dispatch and first delivery after it), p50/max per kind.

    python -m bench.chaos                       # ~10 minutes, >=100 kills, 12 PostgreSQL crashes
    python -m bench.chaos --quick               # ~25 s (the test suite runs this)
    python -m bench.chaos --duration 120 --seed 7 --kills 30 --pg-restarts 4 --json out.json
    python -m bench.chaos --quick --citus       # on a Citus coordinator + 2 workers (docs/citus.md)
    python -m bench.chaos --quick --citus --distribute  # ... the hot tables distributed by bucket
Exit status 1 when anything was lost, doubled or stuck, or a process exited on its own.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from bench.common import machine
from bench.fleet import Child, conclude, finish, log, main_for, outcome_lines, start_fleet
from cronbox import db
from cronbox.migrate import migrate
from cronbox.pgcluster import Cluster, free_port

DURABLE = {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on",
           "shared_buffers": "128MB", "max_connections": "200",
           # crash recovery syncs the data folder first; syncfs is one call instead of one per file
           "recovery_init_sync_method": "syncfs"}


def plan(args: argparse.Namespace, targets: list[str]) -> list[tuple[float, str, str]]:
    """The seeded fault plan: (seconds from start, kind, target). PostgreSQL crashes are spread
    evenly (with jitter) so each recovery can be told apart; the rest fall anywhere."""
    rnd = random.Random(args.seed)
    lo, hi = 3.0, args.duration - 3.0
    out: list[tuple[float, str, str]] = []
    n = args.pg_restarts
    for i in range(n):
        slot = (hi - lo) / n
        out.append((lo + (i + 0.5 + rnd.uniform(-0.3, 0.3)) * slot, "pg_restart", "postgres"))
    out += [(rnd.uniform(lo, hi), "sigkill", rnd.choice(targets)) for _ in range(args.kills)]
    out += [(rnd.uniform(lo, hi), "terminate", "backends") for _ in range(args.terminations)]
    out += [(rnd.uniform(lo, hi), "worker_death", "worker-slow") for _ in range(args.worker_deaths)]
    return sorted(out)


def terminate_backends(dsn: str, rnd: random.Random) -> int:
    with db.connect(dsn) as conn:
        pids = [r[0] for r in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND backend_type = 'client backend'").fetchall()]
        chosen = [p for p in pids if rnd.random() < 0.5] or pids[:1]
        conn.execute("SELECT pg_terminate_backend(p) FROM unnest(%s::int[]) p", (chosen,))
    return len(chosen)


def run(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="cronbox-chaos-"))
    tmp.chmod(0o755)
    port = free_port()
    citus = None
    if args.citus:
        # the coordinator keeps its port through crash restarts (the workers reach it by it)
        from bench.citus_cluster import CitusCluster
        from cronbox.citus import migrate_citus

        citus = CitusCluster(tmp / "citus", settings=DURABLE)
        citus.coordinator.settings["port"] = str(port)
        cluster = citus.coordinator
    else:
        cluster = Cluster(tmp / "pg", settings={**DURABLE, "port": str(port)})
    children: list[Child] = []
    ok = False
    try:
        if citus is not None:
            dsn = citus.start()  # the extension lives in database postgres on every node
            migrate_citus(dsn, distribute=args.distribute)
        else:
            cluster.start()
            with db.connect(cluster.dsn()) as conn:
                conn.execute("CREATE DATABASE chaos")
            dsn = cluster.dsn("chaos")
            migrate(dsn)
        # a send that failed while its (starved) worker did not answer backs off per row; the
        # default cap (1 min, 10 min before) could leave those rows waiting past the settle
        fleet = start_fleet(dsn, tmp, args, children, {"CRONBOX_RELAY_BACKOFF_MAX": "5s"})
        by_name = {c.name: c for c in children}
        faults_plan = plan(args, fleet.procs)
        rnd = random.Random(args.seed + 1)
        log(f"chaos: {len(fleet.names)} jobs/s for {args.duration:g}s, {len(faults_plan)} faults (seed {args.seed}), logs in {tmp}")
        t0 = time.monotonic()
        faults: list[dict[str, Any]] = []
        for at, kind, target in faults_plan:
            while time.monotonic() - t0 < at:
                for c in children:
                    c.revive_if_exited()
                time.sleep(min(0.1, max(0.0, at - (time.monotonic() - t0))))
            f: dict[str, Any] = {"kind": kind, "target": target, "t": time.time()}
            if kind == "sigkill" or kind == "worker_death":
                by_name[target].kill_and_restart()
            elif kind == "pg_restart":
                cluster.stop(mode="immediate")
                cluster.start()
                f["up_at"] = time.time()
                f["down_s"] = round(f["up_at"] - f["t"], 3)
            elif kind == "terminate":
                try:
                    f["backends"] = terminate_backends(dsn, rnd)
                except psycopg.OperationalError as exc:
                    f["error"] = db.explain(exc)
            faults.append(f)
        while time.monotonic() - t0 < args.duration:
            time.sleep(0.2)
        done = finish(dsn, fleet, children, args.settle)
        report = {
            "bench": "chaos", "command": "python -m bench.chaos " + " ".join(args.argv), "seed": args.seed,
            "machine": machine(), "durable": DURABLE, "citus": bool(args.citus),
            "distributed": bool(args.distribute), "duration_s": args.duration, "jobs_per_second": len(fleet.names),
            "pollers": args.pollers, "relays": args.relays, "warm_up_s": round(fleet.warm_s, 1),
            "faults": {k: sum(1 for f in faults if f["kind"] == k) for k in ("sigkill", "pg_restart", "terminate", "worker_death")},
            "pg_down_s": [f["down_s"] for f in faults if "down_s" in f],
        }
        ok = conclude(report, done, faults, children)
        return report
    finally:
        for c in reversed(children):
            c.stop()
        if citus is not None:
            citus.stop()
        else:
            cluster.stop(mode="immediate")
        if ok and not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            log(f"kept {tmp}")


def summary(r: dict[str, Any]) -> list[str]:
    return [f"faults: {r['faults']}  (PostgreSQL down {min(r['pg_down_s'], default=0):.1f}-"
            f"{max(r['pg_down_s'], default=0):.1f}s each)", *outcome_lines(r)]


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="~25 s: 8 jobs, 6 SIGKILLs, 2 PostgreSQL crashes")
    p.add_argument("--duration", type=float, help="seconds of load and faults (default 600)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--jobs", type=int, help="jobs firing every second (default 40)")
    p.add_argument("--kills", type=int, help="SIGKILLs of pollers and relays (default 110)")
    p.add_argument("--pg-restarts", type=int, help="crash restarts of PostgreSQL (default 12)")
    p.add_argument("--terminations", type=int, help="rounds of pg_terminate_backend (default 20)")
    p.add_argument("--worker-deaths", type=int, help="kills of the SQL-completing worker (default 3)")
    p.add_argument("--pollers", type=int, default=2)
    p.add_argument("--relays", type=int, default=2)
    p.add_argument("--settle", type=float, default=90, help="max seconds to let runs finish after the load")
    p.add_argument("--json", dest="json_out")
    p.add_argument("--keep", action="store_true", help="keep the cluster and logs")
    p.add_argument("--citus", action="store_true",
                   help="on a Citus coordinator and two worker nodes after `cronbox migrate --citus` "
                        "(PostgreSQL crashes are the coordinator's)")
    p.add_argument("--distribute", action="store_true",
                   help="with --citus: `cronbox migrate --citus --distribute`, the hot tables distributed by "
                        "bucket over the worker nodes (docs/citus.md)")
    args = p.parse_args(argv)
    if args.distribute and not args.citus:
        p.error("--distribute needs --citus")
    args.argv = list(argv if argv is not None else sys.argv[1:])
    full = {"duration": 600, "jobs": 40, "kills": 110, "pg_restarts": 12, "terminations": 20, "worker_deaths": 3}
    quick = {"duration": 25, "jobs": 8, "kills": 6, "pg_restarts": 2, "terminations": 2, "worker_deaths": 1}
    for k, v in (quick if args.quick else full).items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    return args


def main(argv: list[str] | None = None) -> int:
    return main_for(parse, run, summary, argv)


if __name__ == "__main__":
    sys.exit(main())
