"""Failover to a streaming standby, under load, several times in one run.

Two PostgreSQL servers on this machine, durable settings: a primary and a standby made with
`pg_basebackup -R`, synchronous replication (`synchronous_commit = on`,
`synchronous_standby_names = 'FIRST 1 (nodea, nodeb)'`: a commit returns only once the standby
has it, so a committed dispatch survives losing the primary). Pollers, relays and the HTTP
workers all use one multi-host DSN (`host=127.0.0.1,127.0.0.1 port=pa,pb
target_session_attrs=read-write`) and are never told about a failover. Jobs fire every second
across several queues. Each failover:

1. the primary is killed (`pg_ctl stop -m immediate`);
2. operator step: `synchronous_standby_names` emptied on the standby (ALTER SYSTEM + reload;
   it has no standby of its own yet, and a synchronous primary without one blocks every
   commit), then `pg_ctl promote`;
3. the old primary is rebuilt as a standby of the new one (`pg_rewind -R`, or a fresh
   `pg_basebackup -R` if the rewind fails) and started;
4. operator step: `synchronous_standby_names` restored on the new primary once the rebuilt
   standby streams; the next failover waits for the standby to be synchronous again.

The roles alternate, so an even count fails back to the first node. The end checks are
bench.chaos's (bench/chaos_checks.py) plus one for a lost commit: a run a worker received that
the surviving database does not know. Recovery per failover: first dispatch and first delivery
after the kill and after the promotion.

    python -m bench.failover                     # 240 s, 20 jobs/s, 6 failovers
    python -m bench.failover --quick             # ~30 s, 2 failovers (the test suite runs a variant)
    python -m bench.failover --duration 120 --failovers 4 --json out.json
Exit status 1 when anything was lost, doubled or stuck, or a process exited on its own.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from bench.chaos import DURABLE
from bench.common import machine
from bench.fleet import Child, conclude, finish, log, main_for, outcome_lines, start_fleet
from cronbox import db
from cronbox.migrate import migrate
from cronbox.pgcluster import Cluster, ClusterError, free_port

HA = {**DURABLE, "wal_level": "replica", "wal_log_hints": "on", "max_wal_senders": "10",
      "wal_keep_size": "512MB", "hot_standby": "on", "wal_receiver_status_interval": "1s",
      # TCP only: a socket file in the data folder breaks pg_rewind (it copies the folder)
      "unix_socket_directories": ""}
SYNC_NAMES = "FIRST 1 (nodea, nodeb)"


class Node:
    """One server of the pair, on a fixed port (the DSN lists both)."""

    def __init__(self, root: Path, name: str):
        self.name, self.port = name, free_port()
        self.cluster = Cluster(root / name, settings={**HA, "port": str(self.port), "cluster_name": name})

    def dsn(self, dbname: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname={dbname}"

    def set_sync(self, names: str) -> None:
        """ALTER SYSTEM synchronous_standby_names + reload (works on a standby as well)."""
        with db.connect(self.dsn()) as conn:
            conn.execute(f"ALTER SYSTEM SET synchronous_standby_names = '{names}'")
            conn.execute("SELECT pg_reload_conf()")

    def sync_standby(self) -> str | None:
        """The application_name of the synchronous standby streaming from this node, if any."""
        try:
            with db.connect(self.dsn()) as conn:
                row = conn.execute("SELECT application_name FROM pg_stat_replication"
                                   " WHERE sync_state = 'sync' AND state = 'streaming'").fetchone()
        except psycopg.OperationalError:
            return None
        return row[0] if row else None


def wait_for(cond, timeout: float, what: str) -> float:
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout:
            raise RuntimeError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.1)
    return time.monotonic() - t0


def rebuild(old: Node, new: Node) -> str:
    """The old primary as a standby of the new one: pg_rewind, else a fresh base backup.

    CHECKPOINT on the new primary first: a freshly promoted server records its new timeline in
    its control file only at its next checkpoint, and pg_rewind reads the timeline there; without
    it pg_rewind says "no rewind required" and leaves the old primary's diverged WAL in place
    (the rebuilt standby then cannot follow, and what it holds past the fork is wrong)."""
    with db.connect(new.dsn()) as conn:
        conn.execute("CHECKPOINT")
    try:
        old.cluster.rewind(new.cluster)
        how = "pg_rewind"
    except ClusterError as exc:
        log(f"pg_rewind failed ({str(exc)[:200]}); fresh pg_basebackup instead")
        old.cluster.basebackup(new.cluster)
        how = "pg_basebackup"
    old.cluster.start()
    return how


def failover(primary: Node, standby: Node) -> dict[str, Any]:
    f: dict[str, Any] = {"kind": "failover", "from": primary.name, "to": standby.name, "t": time.time()}
    primary.cluster.stop(mode="immediate")
    standby.set_sync("")  # operator step: no standby of its own yet, so do not wait for one
    standby.cluster.promote()
    f["up_at"] = time.time()
    f["promoted_s"] = round(f["up_at"] - f["t"], 3)
    t = time.monotonic()
    f["rebuilt_with"] = rebuild(primary, standby)
    f["rebuild_s"] = round(time.monotonic() - t, 3)
    standby.set_sync(SYNC_NAMES)  # operator step: synchronous again once the standby streams
    f["sync_again_s"] = round(f["rebuild_s"] + wait_for(lambda: standby.sync_standby() == primary.name, 120,
                                                           f"{primary.name} streaming synchronously"), 3)
    log(f"failover {primary.name} -> {standby.name}: promoted {f['promoted_s']}s after the kill, "
        f"{primary.name} rebuilt ({f['rebuilt_with']}) and synchronous {f['sync_again_s']}s after promotion")
    return f


def run(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="cronbox-failover-"))
    tmp.chmod(0o755)
    a, b = Node(tmp, "nodea"), Node(tmp, "nodeb")
    children: list[Child] = []
    ok = False
    try:
        a.cluster.init()
        with open(a.cluster.data / "postgresql.conf", "a") as conf:
            # in the file, not only on the command line: pg_rewind's single-user crash recovery
            # of the old primary reads only the file, and would record wal_log_hints off
            conf.write("\nwal_log_hints = on\nwal_keep_size = 512MB\n")
        a.cluster.start()
        with db.connect(a.dsn()) as conn:
            conn.execute("CREATE DATABASE chaos")
        b.cluster.basebackup(a.cluster)
        b.cluster.start()
        a.set_sync(SYNC_NAMES)  # only now: with no standby yet, every commit would wait
        wait_for(lambda: a.sync_standby() == "nodeb", 120, "nodeb streaming synchronously")
        dsn = (f"host=127.0.0.1,127.0.0.1 port={a.port},{b.port} user=postgres dbname=chaos "
               "target_session_attrs=read-write connect_timeout=2")
        migrate(dsn)
        fleet = start_fleet(dsn, tmp, args, children)
        log(f"failover: {len(fleet.names)} jobs/s for {args.duration:g}s, {args.failovers} failovers, logs in {tmp}")
        t0 = time.monotonic()
        faults: list[dict[str, Any]] = []
        primary, standby = a, b
        slot = args.duration / (args.failovers + 0.5)
        for i in range(args.failovers):
            while time.monotonic() - t0 < (i + 0.5) * slot:
                for c in children:
                    c.revive_if_exited()
                time.sleep(0.1)
            faults.append(failover(primary, standby))
            primary, standby = standby, primary
        while time.monotonic() - t0 < args.duration:
            for c in children:
                c.revive_if_exited()
            time.sleep(0.2)
        done = finish(dsn, fleet, children, args.settle)
        report = {
            "bench": "failover", "command": "python -m bench.failover " + " ".join(args.argv),
            "machine": machine(), "settings": HA, "synchronous_standby_names": SYNC_NAMES,
            "duration_s": args.duration, "jobs_per_second": len(fleet.names), "pollers": args.pollers,
            "relays": args.relays, "warm_up_s": round(fleet.warm_s, 1),
            "faults": {"failover": len(faults)}, "failovers": faults,
        }
        ok = conclude(report, done, faults, children)
        return report
    finally:
        for c in reversed(children):
            c.stop()
        for n in (a, b):
            n.cluster.stop(mode="immediate")
        if ok and not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            log(f"kept {tmp}")


def summary(r: dict[str, Any]) -> list[str]:
    return [f"failovers: {len(r['failovers'])}, promoted {', '.join(str(f['promoted_s']) for f in r['failovers'])} s "
            "after the kill", *outcome_lines(r)]


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.failover", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="~30 s: 6 jobs, 2 failovers (there and back)")
    p.add_argument("--duration", type=float, help="seconds of load (default 240)")
    p.add_argument("--jobs", type=int, help="jobs firing every second (default 20)")
    p.add_argument("--failovers", type=int, help="failovers, alternating between the two nodes (default 6)")
    p.add_argument("--pollers", type=int, default=2)
    p.add_argument("--relays", type=int, default=2)
    p.add_argument("--settle", type=float, default=90, help="max seconds to let runs finish after the load")
    p.add_argument("--json", dest="json_out")
    p.add_argument("--keep", action="store_true", help="keep the clusters and logs")
    args = p.parse_args(argv)
    args.argv = list(argv if argv is not None else sys.argv[1:])
    defaults = {"duration": 30, "jobs": 6, "failovers": 2} if args.quick else {"duration": 240, "jobs": 20, "failovers": 6}
    for k, v in defaults.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    if args.failovers < 1:
        p.error("--failovers: at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    return main_for(parse, run, summary, argv)


if __name__ == "__main__":
    sys.exit(main())
