"""cronbox under Patroni (etcd), through switchovers and failovers under load.

A Patroni cluster on this machine (bench/patroni_cluster.py: etcd, a primary and a synchronous
standby in `synchronous_mode`, HAProxy in front checking Patroni's REST API), the fleet of
bench.chaos (pollers, relays and two HTTP workers recording every delivery, jobs firing every
second across several queues) on either the multi-host DSN (`--via multihost`,
`target_session_attrs=read-write`) or HAProxy's port (`--via haproxy`). The processes are never
told about a change. The changes, in order, each repeated `--repeat` times, steady load between:

- `switchover`: `patronictl switchover` to the synchronous standby (planned);
- `kill_postmaster`: SIGKILL of the primary's postmaster (Patroni fails over: primary_start_timeout 0);
- `freeze`: SIGSTOP of the primary's Patroni until its leader key expires and the standby is
  promoted, `--hold` seconds more, then SIGCONT (it demotes itself).

After each change the old primary rejoins (pg_rewind by Patroni when it diverged) and the next
change waits for it to stream synchronously again. The end checks are bench.chaos's (nothing
lost, doubled or stuck; duplicates only with the same idempotency key; no delivered run unknown
to the surviving database). Per change: the fire -> dispatch delay of the fires due from the
change until the cluster is whole again (max, p99), and fire -> delivery at the worker.

    python -m bench.patroni                              # multi-host DSN, 3 kinds x 2, 20 jobs/s
    python -m bench.patroni --via haproxy
    python -m bench.patroni --jobs 4 --repeat 1 --json out.json
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

import orjson

from bench.common import machine, pct
from bench.fleet import Child, Fleet, conclude, finish, log, main_for, outcome_lines, start_fleet
from bench.patroni_cluster import PG_PARAMETERS, TIMING, PatroniCluster
from cronbox import db
from cronbox.migrate import migrate

KINDS = ("switchover", "kill_postmaster", "freeze")
TAIL = 2.0  # seconds after the cluster is whole again still counted as part of the change


def dsn_for(cluster: PatroniCluster, via: str, dbname: str) -> str:
    return cluster.haproxy_dsn(dbname) if via == "haproxy" else cluster.multi_host_dsn(dbname)


def create_database(cluster: PatroniCluster, dbname: str) -> None:
    with db.connect(cluster.converged().dsn()) as conn:
        conn.execute(f'CREATE DATABASE "{dbname}"')


def delays(dsn: str, fleet: Fleet, faults: list[dict[str, Any]], warm: float) -> dict[str, Any]:
    """Per change and for the fires outside every change (after the warm-up, `warm`, epoch
    seconds): fire -> dispatch (first attempt, from
    the run table: the database's clock) and fire -> first delivery at a worker (its records;
    one machine, one clock), each max and p99 in seconds. Early dispatch (CRONBOX_DISPATCH_LEAD)
    makes a dispatch before its fire time count as 0."""
    with db.connect(dsn) as conn:
        runs = conn.execute(
            "SELECT run_id, extract(epoch FROM fire_at)::float8, extract(epoch FROM dispatched_at)::float8"
            " FROM cronbox.runs WHERE origin = 'schedule' AND attempt = 1 AND dispatched_at IS NOT NULL").fetchall()
    first: dict[int, float] = {}
    for f in fleet.records:
        if f.exists():
            for line in f.read_bytes().splitlines():
                if line.strip():
                    r = orjson.loads(line)
                    first[r["run_id"]] = min(first.get(r["run_id"], r["t"]), r["t"])
    windows = [(f["t"], f["up_at"] + f["rejoined_s"] + TAIL) for f in faults]

    def stats(values: list[float]) -> dict[str, Any]:
        return {"n": len(values), "max_s": round(max(values), 3) if values else None,
                "p99_s": round(pct(values, 99), 3) if values else None}

    def of(lo: float, hi: float, inside: bool) -> dict[str, Any]:
        d, w = [], []
        for run_id, fire, dispatched in runs:
            within = lo <= fire <= hi if inside else fire >= warm and not any(a <= fire <= b for a, b in windows)
            if within:
                d.append(max(0.0, dispatched - fire))
                if run_id in first:
                    w.append(max(0.0, first[run_id] - fire))
        return {"dispatch": stats(d), "delivery": stats(w)}

    per = [{"kind": f["kind"], **of(a, b, True)} for f, (a, b) in zip(faults, windows, strict=True)]
    by_kind: dict[str, Any] = {}
    for k in KINDS:
        ds = [p for p in per if p["kind"] == k]
        if ds:
            by_kind[k] = {what: {"max_s": max(p[what]["max_s"] or 0 for p in ds),
                                 "p99_s": max(p[what]["p99_s"] or 0 for p in ds)} for what in ("dispatch", "delivery")}
    return {"per_change": per, "by_kind": by_kind, "steady": of(0, 0, False)}


def exercise(cluster: PatroniCluster, dsn: str, tmp: Path, args: argparse.Namespace,
             children: list[Child]) -> dict[str, Any]:
    """Migrate through `dsn`, start the fleet on it, go through the changes, settle, check.
    The caller owns the cluster and stops `children` (appended to as they start)."""
    migrate(dsn)
    fleet = start_fleet(dsn, tmp, args, children, {"CRONBOX_RELAY_BACKOFF_MAX": "5s"})
    warm = time.time()
    plan = [k for _ in range(args.repeat) for k in args.changes]
    log(f"patroni via {args.via}: {len(fleet.names)} jobs/s, changes {plan}, logs in {tmp}")
    faults: list[dict[str, Any]] = []
    for kind in plan:
        t0 = time.monotonic()
        while time.monotonic() - t0 < args.gap:
            for c in children:
                c.revive_if_exited()
            time.sleep(0.2)
        f = cluster.change(kind, hold=args.hold)
        log(f"{kind} {f['from']} -> {f['to']}: promoted {f['promoted_s']}s, rejoined "
            f"{f['rejoined_s']}s later{' (pg_rewind)' if f['rewound'] else ''}")
        faults.append(f)
    time.sleep(args.gap)
    done = finish(dsn, fleet, children, args.settle)
    report = {
        "bench": "patroni", "command": "python -m bench.patroni " + " ".join(args.argv), "via": args.via,
        "machine": machine(), "patroni": TIMING | {"synchronous_mode": True, "primary_start_timeout": 0},
        "postgresql": PG_PARAMETERS, "jobs_per_second": len(fleet.names), "pollers": args.pollers,
        "relays": args.relays, "warm_up_s": round(fleet.warm_s, 1), "changes": faults,
        "delays": delays(dsn, fleet, faults, warm),
    }
    conclude(report, done, faults, children)
    return report


def run(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="cronbox-patroni-"))
    tmp.chmod(0o755)
    cluster = PatroniCluster(tmp / "ha")
    children: list[Child] = []
    report: dict[str, Any] = {"ok": False}
    try:
        cluster.start()
        create_database(cluster, "chaos")
        report = exercise(cluster, dsn_for(cluster, args.via, "chaos"), tmp, args, children)
        return report
    finally:
        for c in reversed(children):
            c.stop()
        cluster.stop()
        if report["ok"] and not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            log(f"kept {tmp}")


def summary(r: dict[str, Any]) -> list[str]:
    lines = [f"via {r['via']}: " + ", ".join(
        f"{f['kind']} {f['from']}->{f['to']} promoted {f['promoted_s']}s" for f in r["changes"])]
    for kind, d in r["delays"]["by_kind"].items():
        lines.append(f"{kind}: fire->dispatch max {d['dispatch']['max_s']}s p99 {d['dispatch']['p99_s']}s; "
                     f"fire->delivery max {d['delivery']['max_s']}s p99 {d['delivery']['p99_s']}s")
    s = r["delays"]["steady"]
    lines.append(f"steady: fire->dispatch max {s['dispatch']['max_s']}s p99 {s['dispatch']['p99_s']}s")
    return [*lines, *outcome_lines(r)]


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.patroni", description=__doc__.split("\n\n")[0])
    p.add_argument("--via", choices=("multihost", "haproxy"), default="multihost")
    p.add_argument("--changes", type=lambda s: [k.strip() for k in s.split(",") if k.strip()],
                   default=list(KINDS), help=f"comma-separated, in order (default {','.join(KINDS)})")
    p.add_argument("--repeat", type=int, default=2, help="times through the changes (default 2)")
    p.add_argument("--jobs", type=int, default=20, help="jobs firing every second (default 20)")
    p.add_argument("--gap", type=float, default=8, help="seconds of steady load before each change")
    p.add_argument("--hold", type=float, default=3, help="freeze: seconds two nodes believe they lead")
    p.add_argument("--pollers", type=int, default=2)
    p.add_argument("--relays", type=int, default=2)
    p.add_argument("--settle", type=float, default=90, help="max seconds to let runs finish after the load")
    p.add_argument("--json", dest="json_out")
    p.add_argument("--keep", action="store_true", help="keep the cluster's folders and logs")
    args = p.parse_args(argv)
    args.argv = list(argv if argv is not None else sys.argv[1:])
    bad = [k for k in args.changes if k not in KINDS]
    if bad or not args.changes:
        p.error(f"--changes: each of {', '.join(KINDS)}")
    if args.repeat < 1:
        p.error("--repeat: at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    return main_for(parse, run, summary, argv)


if __name__ == "__main__":
    sys.exit(main())
