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
Exit status 1 when anything was lost, doubled or stuck, or a process exited on its own.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import psycopg

from bench.chaos_checks import FINAL, ORPHANS, SLOW_QUEUE, check, recovery
from bench.common import REPO, machine, process_env
from cronbox import db
from cronbox.migrate import migrate
from cronbox.pgcluster import Cluster, free_port

DURABLE = {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on",
           "shared_buffers": "128MB", "max_connections": "200",
           # crash recovery syncs the data folder first; syncfs is one call instead of one per file
           "recovery_init_sync_method": "syncfs"}
FAST_QUEUES = ("q0", "q1", "q2")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Child:
    """A process the bench restarts after killing it; output appended to one log file."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], logdir: Path):
        self.name, self.argv, self.env, self.logfile = name, argv, env, logdir / f"{name}.log"
        self.unexpected_exits: list[int] = []
        self.start()

    def start(self) -> None:
        with open(self.logfile, "ab") as out:
            self.popen = subprocess.Popen(self.argv, env=self.env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)

    def kill_and_restart(self) -> None:
        self.popen.kill()
        self.popen.wait()
        self.start()

    def revive_if_exited(self) -> None:
        """A process that exited without being killed is a finding: count it, start it again."""
        if self.popen.poll() is not None:
            self.unexpected_exits.append(self.popen.returncode)
            log(f"{self.name} exited on its own ({self.popen.returncode}); restarting")
            self.start()

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(20)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


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


def db_now(dsn: str, timeout: float = 60) -> float:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with db.connect(dsn) as conn:
                return float(conn.execute("SELECT extract(epoch FROM now())").fetchone()[0])
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def terminate_backends(dsn: str, rnd: random.Random) -> int:
    with db.connect(dsn) as conn:
        pids = [r[0] for r in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND backend_type = 'client backend'").fetchall()]
        chosen = [p for p in pids if rnd.random() < 0.5] or pids[:1]
        conn.execute("SELECT pg_terminate_backend(p) FROM unnest(%s::int[]) p", (chosen,))
    return len(chosen)


def schedule_jobs(dsn: str, n: int) -> tuple[list[str], float]:
    """n jobs every second from a common start 3 s ahead (database clock), catch-up 'all' so
    every fire is expected to run, overlap 'allow' so none is skipped."""
    names = []
    with db.connect(dsn) as conn:
        start = conn.execute("SELECT date_trunc('second', now()) + interval '3 seconds'").fetchone()[0]
        n_slow = max(1, n // 8)
        for i in range(n):
            slow = i < n_slow
            name = f"job{i:03d}"
            conn.execute(
                "SELECT cronbox.schedule(%s, every => '1 second', queue => %s, starts_at => %s, catchup => 'all',"
                " overlap => 'allow', timeout => %s, max_attempts => 5, retry_delay => '1 second')",
                (name, SLOW_QUEUE if slow else FAST_QUEUES[i % len(FAST_QUEUES)], start,
                 "3 seconds" if slow else "1 minute"))
            names.append(name)
    return names, start.timestamp()


def settle(dsn: str, cutoff: float, expected: int, children: list[Child], timeout: float) -> float:
    """Keep the fleet running until every fire up to the cutoff has its run and every run up
    to the cutoff is final (or the timeout)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        for c in children:
            c.revive_if_exited()
        with db.connect(dsn) as conn:
            fired, open_runs = conn.execute(
                "SELECT count(*) FILTER (WHERE origin = 'schedule'), count(*) FILTER (WHERE state <> ALL(%s))"
                " FROM cronbox.run WHERE fire_at <= to_timestamp(%s)", (list(FINAL), cutoff)).fetchone()
            unacked = conn.execute(ORPHANS, (cutoff,)).fetchone()[0]
        if open_runs == 0 and fired >= expected and unacked == 0:
            break
        time.sleep(0.5)
    return time.monotonic() - t0


def warm_up(files: list[Path], children: list[Child], timeout: float = 180) -> float:
    """Start the fault clock only once every worker has received a delivery (Python start-up
    on a loaded 2-core machine takes seconds)."""
    t0 = time.monotonic()
    while not all(f.exists() and f.stat().st_size > 0 for f in files):
        for c in children:
            c.revive_if_exited()
        if time.monotonic() - t0 > timeout:
            raise RuntimeError(f"no delivery within {timeout:g}s: see the logs")
        time.sleep(0.2)
    return time.monotonic() - t0


def run(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="cronbox-chaos-"))
    tmp.chmod(0o755)
    port = free_port()
    cluster = Cluster(tmp / "pg", settings={**DURABLE, "port": str(port)})
    children: list[Child] = []
    ok = False
    try:
        cluster.start()
        with db.connect(cluster.dsn()) as conn:
            conn.execute("CREATE DATABASE chaos")
        dsn = cluster.dsn("chaos")
        migrate(dsn)
        fast_port, slow_port = free_port(), free_port()
        rec_fast, rec_slow = tmp / "deliveries-fast.jsonl", tmp / "deliveries-slow.jsonl"
        worker = [sys.executable, "-m", "bench.chaos_worker"]
        env = process_env(dsn, {
            "CRONBOX_LOG_LEVEL": "info", "CRONBOX_RELAY_LEASE": "5s", "CRONBOX_HTTP_TIMEOUT": "2s",
            # a send that failed while its (starved) worker did not answer backs off per row; the
            # default cap (1 min, 10 min before) could leave those rows waiting past the settle
            "CRONBOX_RELAY_BACKOFF_MAX": "5s",
            "CRONBOX_SINKS": f"{SLOW_QUEUE}=http://127.0.0.1:{slow_port}/run;*=http://127.0.0.1:{fast_port}/run"})
        children.append(Child("worker-fast", [*worker, "--port", str(fast_port), "--record", str(rec_fast)], env, tmp))
        children.append(Child("worker-slow", [*worker, "--port", str(slow_port), "--record", str(rec_slow),
                                              "--mode", "sql", "--dsn", dsn], env, tmp))
        names, start = schedule_jobs(dsn, args.jobs)
        procs = {f"poller-{i}": "poller" for i in range(args.pollers)} | {f"relay-{i}": "relay" for i in range(args.relays)}
        for name, cmd in procs.items():
            children.append(Child(name, [sys.executable, "-m", "cronbox", cmd], env, tmp))
        by_name = {c.name: c for c in children}
        faults_plan = plan(args, list(procs))
        warm_s = warm_up([rec_fast, rec_slow], children)
        rnd = random.Random(args.seed + 1)
        log(f"chaos: {len(names)} jobs/s for {args.duration:g}s, {len(faults_plan)} faults (seed {args.seed}), logs in {tmp}")
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
        cutoff = db_now(dsn) - 1.0
        expected = len(names) * (int(cutoff - start) + 1)
        settled_s = settle(dsn, cutoff, expected, children, timeout=args.settle)
        for c in children:
            c.revive_if_exited()
        for c in reversed(children):
            c.stop()
        records = [orjson.loads(line) for f in (rec_fast, rec_slow) if f.exists()
                   for line in f.read_bytes().splitlines() if line.strip()]
        result = check(dsn, names, start, cutoff, records)
        with db.connect(dsn) as conn:
            dispatches = sorted(float(r[0]) for r in conn.execute(
                "SELECT extract(epoch FROM dispatched_at) FROM cronbox.run WHERE dispatched_at IS NOT NULL").fetchall())
        report = {
            "bench": "chaos", "command": "python -m bench.chaos " + " ".join(args.argv), "seed": args.seed,
            "machine": machine(), "durable": DURABLE, "duration_s": args.duration, "jobs_per_second": len(names),
            "pollers": args.pollers, "relays": args.relays, "warm_up_s": round(warm_s, 1), "settle_s": round(settled_s, 1),
            "faults": {k: sum(1 for f in faults if f["kind"] == k) for k in ("sigkill", "pg_restart", "terminate", "worker_death")},
            "pg_down_s": [f["down_s"] for f in faults if "down_s" in f],
            "unexpected_exits": {c.name: c.unexpected_exits for c in children if c.unexpected_exits},
            "checks": result,
            "recovery": recovery(faults, dispatches, sorted(r["t"] for r in records)),
        }
        c = result
        report["ok"] = ok = (c["lost"] == 0 and c["doubled"] == 0 and c["stuck"] == 0 and c["orphan_outbox_rows"] == 0
                             and c["duplicates_with_another_key"] == 0 and c["keys_shared_by_two_runs"] == 0
                             and c["succeeded_without_delivery"] == 0 and c["lost_runs_not_retried"] == 0 and c["delivered_runs_unknown"] == 0
                             and not report["unexpected_exits"])
        return report
    finally:
        for c in reversed(children):
            c.stop()
        cluster.stop(mode="immediate")
        if ok and not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            log(f"kept {tmp}")


def summary(r: dict[str, Any]) -> list[str]:
    c = r["checks"]
    lines = [f"faults: {r['faults']}  (PostgreSQL down {min(r['pg_down_s'], default=0):.1f}-{max(r['pg_down_s'], default=0):.1f}s each)",
             f"fires expected {c['expected_fires']}: lost {c['lost']}, doubled {c['doubled']}, missed {c['missed']}; "
             f"stuck {c['stuck']}, leased {c['leased']}, orphan outbox rows {c['orphan_outbox_rows']}",
             f"deliveries {c['deliveries']}: runs delivered twice {c['runs_delivered_more_than_once']} "
             f"(with another key: {c['duplicates_with_another_key']}), unexpected exits {r['unexpected_exits'] or 0}"]
    for kind, d in r["recovery"].items():
        lines.append(f"recovery {kind}: " + ", ".join(f"{k} p50 {v['p50_s']:.2f}s max {v['max_s']:.2f}s" for k, v in d.items()))
    lines.append("OK" if r["ok"] else "FAILED")
    return lines


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
    args = p.parse_args(argv)
    args.argv = list(argv if argv is not None else sys.argv[1:])
    full = {"duration": 600, "jobs": 40, "kills": 110, "pg_restarts": 12, "terminations": 20, "worker_deaths": 3}
    quick = {"duration": 25, "jobs": 8, "kills": 6, "pg_restarts": 2, "terminations": 2, "worker_deaths": 1}
    for k, v in (quick if args.quick else full).items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    return args


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # unwind: stop the children and the cluster


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    args = parse(argv)
    report = run(args)
    text = json.dumps(report, indent=2, default=str)
    if args.json_out:
        Path(args.json_out).write_text(text)
    else:
        print(text)
    print("\n".join(summary(report)), file=sys.stderr, flush=True)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
