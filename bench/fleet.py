"""What bench.chaos and bench.failover share: the fleet under test (two HTTP workers that
record every delivery, pollers and relays as real `cronbox` processes, restarted when killed),
the jobs, and the end of a run (settle, stop, check, recovery, verdict), and their `main`."""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import psycopg

from bench.chaos_checks import FINAL, ORPHANS, SLOW_QUEUE, check, recovery
from bench.common import REPO, process_env
from cronbox import db
from cronbox.pgcluster import free_port

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
                " FROM cronbox.runs WHERE fire_at <= to_timestamp(%s)", (list(FINAL), cutoff)).fetchone()
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


@dataclasses.dataclass
class Fleet:
    names: list[str]       # the jobs, each firing every second
    start: float           # their common first fire (database clock, epoch seconds)
    records: list[Path]    # the workers' delivery records (JSON lines)
    procs: list[str]       # the pollers' and relays' child names
    warm_s: float          # until every worker had its first delivery


def start_fleet(dsn: str, tmp: Path, args: argparse.Namespace, children: list[Child],
                env_extra: dict[str, str] | None = None) -> Fleet:
    """Two workers (fast queues: answer with the outcome; `slow`: 202, then complete through
    SQL), the jobs, args.pollers pollers and args.relays relays, appended to `children` as they
    start (so the caller stops whatever started if this fails half-way); returns once every
    worker has had a delivery."""
    fast_port, slow_port = free_port(), free_port()
    records = [tmp / "deliveries-fast.jsonl", tmp / "deliveries-slow.jsonl"]
    worker = [sys.executable, "-m", "bench.chaos_worker"]
    env = process_env(dsn, {
        "CRONBOX_LOG_LEVEL": "info", "CRONBOX_RELAY_LEASE": "5s", "CRONBOX_HTTP_TIMEOUT": "2s", **(env_extra or {}),
        "CRONBOX_SINKS": f"{SLOW_QUEUE}=http://127.0.0.1:{slow_port}/run;*=http://127.0.0.1:{fast_port}/run"})
    children.append(Child("worker-fast", [*worker, "--port", str(fast_port), "--record", str(records[0])], env, tmp))
    children.append(Child("worker-slow", [*worker, "--port", str(slow_port), "--record", str(records[1]),
                                          "--mode", "sql", "--dsn", dsn], env, tmp))
    names, start = schedule_jobs(dsn, args.jobs)
    procs = {f"poller-{i}": "poller" for i in range(args.pollers)} | {f"relay-{i}": "relay" for i in range(args.relays)}
    for name, cmd in procs.items():
        children.append(Child(name, [sys.executable, "-m", "cronbox", cmd], env, tmp))
    return Fleet(names, start, records, list(procs), warm_up(records, children))


def finish(dsn: str, fleet: Fleet, children: list[Child], settle_timeout: float) -> dict[str, Any]:
    """After the fault phase: the cutoff (database clock - 1 s), settle, stop the fleet, then
    the checks from the tables and the delivery records, and the recovery of each fault kind
    (`recovery` is filled in by `conclude` once the caller's faults are known)."""
    cutoff = db_now(dsn) - 1.0
    expected = len(fleet.names) * (int(cutoff - fleet.start) + 1)
    settled_s = settle(dsn, cutoff, expected, children, timeout=settle_timeout)
    for c in children:
        c.revive_if_exited()
    for c in reversed(children):
        c.stop()
    records = [orjson.loads(line) for f in fleet.records if f.exists()
               for line in f.read_bytes().splitlines() if line.strip()]
    with db.connect(dsn) as conn:
        dispatches = sorted(float(r[0]) for r in conn.execute(
            "SELECT extract(epoch FROM dispatched_at) FROM cronbox.runs WHERE dispatched_at IS NOT NULL").fetchall())
    return {"settled_s": settled_s, "checks": check(dsn, fleet.names, fleet.start, cutoff, records),
            "dispatches": dispatches, "deliveries": sorted(r["t"] for r in records)}


def conclude(report: dict[str, Any], done: dict[str, Any], faults: list[dict[str, Any]],
             children: list[Child]) -> bool:
    """Fills the report's checks, recovery, unexpected exits and verdict; returns the verdict."""
    report["settle_s"] = round(done["settled_s"], 1)
    report["unexpected_exits"] = {c.name: c.unexpected_exits for c in children if c.unexpected_exits}
    report["checks"] = c = done["checks"]
    report["recovery"] = recovery(faults, done["dispatches"], done["deliveries"])
    report["ok"] = (c["lost"] == 0 and c["doubled"] == 0 and c["stuck"] == 0 and c["orphan_outbox_rows"] == 0
                    and c["duplicates_with_another_key"] == 0 and c["keys_shared_by_two_runs"] == 0
                    and c["succeeded_without_delivery"] == 0 and c["lost_runs_not_retried"] == 0
                    and c["delivered_runs_unknown"] == 0 and not report["unexpected_exits"])
    return report["ok"]


def outcome_lines(r: dict[str, Any]) -> list[str]:
    """The summary lines both benches print after their own first line."""
    c = r["checks"]
    lines = [f"fires expected {c['expected_fires']}: lost {c['lost']}, doubled {c['doubled']}, missed {c['missed']}; "
             f"stuck {c['stuck']}, leased {c['leased']}, orphan outbox rows {c['orphan_outbox_rows']}, "
             f"delivered runs unknown to the database {c['delivered_runs_unknown']}",
             f"deliveries {c['deliveries']}: runs delivered twice {c['runs_delivered_more_than_once']} "
             f"(with another key: {c['duplicates_with_another_key']}), unexpected exits {r['unexpected_exits'] or 0}"]
    for kind, d in r["recovery"].items():
        lines.append(f"recovery {kind}: " + ", ".join(f"{k} p50 {v['p50_s']:.2f}s max {v['max_s']:.2f}s" for k, v in d.items()))
    lines.append("OK" if r["ok"] else "FAILED")
    return lines


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # unwind: stop the children and the clusters


def main_for(parse: Callable[[list[str] | None], argparse.Namespace],
             run: Callable[[argparse.Namespace], dict[str, Any]],
             summary: Callable[[dict[str, Any]], list[str]], argv: list[str] | None) -> int:
    """A bench's main: SIGTERM unwinds, the JSON report to --json or stdout, the summary to
    stderr, exit 1 unless every check passed."""
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
