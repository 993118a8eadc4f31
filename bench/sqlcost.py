"""The SQL cost of each stage of a run, one backend, no Python pipeline in the way.

N one-off jobs due now; then, in one connection with autocommit (a durable commit per call,
as the processes do): `cronbox.dispatch(batch)` until every future is dispatched, then
`cronbox.claim_outbox` + `cronbox.ack_outbox` with the worker's answer (`succeeded`) per batch,
the relay's two transactions. Reports the median microseconds per run of each call and the
WAL bytes per run of dispatch and ack (exact: LSN distance), over `--reps` repetitions.

This isolates the server's share: a regression in a function's plan (say, a nested loop that
re-sorts an array on every probe) shows here as a jump in one stage, where the pipeline benches
only show a lower runs/s.

    python -m bench.sqlcost                 # 20,000 runs, batch 1,000, 3 repetitions
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from bench.common import Database, base_report, emit, log, parse_args
from bench.pipeline import load
from cronbox import db


def wal(conn) -> float:
    return conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8").fetchone()[0]


def one_rep(database: Database, n: int, batch: int) -> dict[str, Any]:
    load(database, n, None)
    with database.connect() as conn:
        conn.execute("VACUUM ANALYZE cronbox.job")
        conn.execute("VACUUM ANALYZE cronbox.job_future")
        times: dict[str, list[float]] = {"dispatch": [], "claim": [], "ack": []}
        wal_bytes = {"dispatch": 0.0, "ack": 0.0}
        done = 0
        while done < n:
            w, t = wal(conn), time.perf_counter()
            got = conn.execute("SELECT dispatched FROM cronbox.dispatch(%s)", (batch,)).fetchone()[0]
            times["dispatch"].append((time.perf_counter() - t) / max(got, 1))
            wal_bytes["dispatch"] += wal(conn) - w
            if got == 0:
                raise SystemExit(f"dispatch stalled at {done} of {n}")
            done += got
        acked = 0
        while True:
            t = time.perf_counter()
            ids = [r[0] for r in conn.execute(
                "SELECT outbox_id FROM cronbox.claim_outbox('sqlcost', %s)", (batch,)).fetchall()]
            if not ids:
                break
            times["claim"].append((time.perf_counter() - t) / len(ids))
            answers = db.Jsonb([{"outbox_id": i, "state": "succeeded"} for i in ids])
            w, t = wal(conn), time.perf_counter()
            acked += conn.execute("SELECT cronbox.ack_outbox('sqlcost', %s, %s)", (ids, answers)).fetchone()[0]
            times["ack"].append((time.perf_counter() - t) / len(ids))
            wal_bytes["ack"] += wal(conn) - w
        ok = conn.execute("SELECT count(*) FROM cronbox.run WHERE state = 'succeeded'").fetchone()[0]
    return {
        "us_per_run": {k: round(statistics.median(v) * 1e6, 1) for k, v in times.items()},
        "wal_bytes_per_run": {k: round(v / n) for k, v in wal_bytes.items()},
        "acked": acked, "succeeded": ok, "complete": ok == n == acked,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="cronbox: server cost per run of dispatch, claim and ack")
    p.add_argument("-n", "--runs", type=int, help="runs per repetition (default 20,000; quick 2,000)")
    p.add_argument("--batch", type=int, default=1000, help="dispatch, claim and ack batch size")
    p.add_argument("--reps", type=int, help="repetitions (default 3; quick 1)")
    args = parse_args(p, argv)
    n = args.runs or (2000 if args.quick else 20_000)
    reps = args.reps or (1 if args.quick else 3)
    with Database(args, "sqlcost") as database:
        report = base_report("sqlcost", args, database, argv)
        report.update({"n": n, "batch": args.batch, "reps": reps, "repetitions": []})
        for i in range(reps):
            rep = one_rep(database, n, args.batch)
            log(f"rep {i + 1}/{reps}: us/run {rep['us_per_run']}, WAL B/run {rep['wal_bytes_per_run']}")
            report["repetitions"].append(rep)
        report["complete"] = all(r["complete"] for r in report["repetitions"])
        report["median_us_per_run"] = {
            k: statistics.median(r["us_per_run"][k] for r in report["repetitions"]) for k in ("dispatch", "claim", "ack")}
    summary = [f"sqlcost: {n} runs x {reps} reps, batch {args.batch}, "
               f"{'durable' if report['durable'] else 'NOT durable'}",
               f"  median us per run: {report['median_us_per_run']}",
               f"  WAL bytes per run (last rep): {report['repetitions'][-1]['wal_bytes_per_run']}",
               f"  every run succeeded once: {report['complete']}"]
    emit(args, report, summary)
    return 0 if report["complete"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
