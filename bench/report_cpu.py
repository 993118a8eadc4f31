"""The server CPU of a single report (`complete_run`, or with `--call` `start_run` or `heartbeat`,
one run per call), this tree against the functions of a git revision, interleaved in one cluster.

Two databases of one private cluster, both migrated by this tree; in the second, the function
and view files that differ from `--base` are re-applied as they were at that revision
(`bench.stage_ab.migrate_as_of`, shared with `bench.stage_ab`). Each
round, in each database: N one-off jobs (overlap 'allow'), dispatched, claimed and acked
delivered, then `complete_run` once per run, `--per-statement` calls in one statement; the
backend's CPU time (utime + stime from /proc) around each statement, per call. The order of the
two databases alternates every round. CPU time, not wall time: on a shared machine it moves far
less with the load than the elapsed time does (cache and frequency effects remain).

    python -m bench.report_cpu --base HEAD~1
    python -m bench.report_cpu --base 7070da5 --rounds 6 -n 2000
    python -m bench.report_cpu --base HEAD~1 --call heartbeat

When the migrations differ from `--base`, the second database is migrated by that revision's
own sql/ tree instead (its migrations, functions and grants, extracted with `git archive`):
tables and functions both as they were.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from bench.common import CLK_TCK, Database, base_report, emit, log, parse_args
from bench.stage_ab import load, migrate_as_of
from cronbox import db


def backend_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def delivered_runs(dsn: str, n: int) -> list[int]:
    """n one-off jobs due now (bench.stage_ab.load), dispatched, claimed and acked delivered: their run ids."""
    with db.connect(dsn) as conn:
        load(conn, n)
        while conn.execute("SELECT dispatched FROM cronbox.dispatch(1000)").fetchone()[0]:
            pass
        runs: list[int] = []
        while rows := conn.execute("SELECT outbox_id, run_id FROM cronbox.claim_outbox('rc', 1000)").fetchall():
            conn.execute("SELECT cronbox.ack_outbox('rc', %s, NULL)", ([o for o, _ in rows],))
            runs += [r for _, r in rows]
    return runs


# Each report, called once per run: the condition its answer meets when the call worked.
CALLS = {
    "complete_run": "cronbox.complete_run(u.id) = 'succeeded'",
    "start_run": "cronbox.start_run(u.id, 'bench-worker') IS NOT NULL",
    "heartbeat": "cronbox.heartbeat(u.id, 'bench-worker') = 'continue'",
}


def report(dsn: str, runs: list[int], per: int, call: str = "complete_run") -> list[float]:
    """CPU seconds per call of the report `call`, one figure per statement of `per` calls."""
    out = []
    with db.connect(dsn) as conn:
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        for i in range(0, len(runs), per):
            chunk = runs[i:i + per]
            before = backend_cpu(pid)
            done = conn.execute("SELECT count(*) FROM unnest(%s::bigint[]) AS u(id) "
                                f"WHERE {CALLS[call]}", (chunk,)).fetchone()[0]
            out.append((backend_cpu(pid) - before) / len(chunk))
            if done != len(chunk):
                raise SystemExit(f"{done} of {len(chunk)} reports succeeded")
        while conn.execute("SELECT cronbox.fold_job_stats(10000)").fetchone()[0]:
            pass
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="cronbox: backend CPU of one report call, this tree vs --base")
    p.add_argument("--base", required=True, help="git revision whose function bodies are compared")
    p.add_argument("-n", "--runs", type=int, help="runs per database per round (default 2,000; quick 200)")
    p.add_argument("--rounds", type=int, help="default 4; quick 2")
    p.add_argument("--per-statement", type=int, default=100, help="report calls per statement")
    p.add_argument("--call", choices=sorted(CALLS), default="complete_run", help="the report measured (default complete_run)")
    args = parse_args(p, argv)
    args.runs = args.runs or (200 if args.quick else 2000)
    args.rounds = args.rounds or (2 if args.quick else 4)
    with Database(args, "report-cpu") as database:
        out = base_report("report_cpu", args, database, argv)
        with db.connect(database.dsn) as conn:
            conn.execute("CREATE DATABASE base")
        base_dsn = database.dsn.replace("/bench", "/base")
        old = migrate_as_of(base_dsn, args.base)
        log(f"base {args.base}: " + ("migrated by its own sql/ (the migrations differ)" if old == ["sql/"]
                                     else f"{len(old)} function files as they were: {', '.join(old)}"))
        cpu: dict[str, list[float]] = {"this": [], "base": []}
        for rnd in range(args.rounds):
            order = [("this", database.dsn), ("base", base_dsn)]
            for name, dsn in order if rnd % 2 == 0 else order[::-1]:
                runs = delivered_runs(dsn, args.runs)
                cpu[name] += report(dsn, runs, args.per_statement, args.call)
            log(f"round {rnd + 1}: this {statistics.median(cpu['this']) * 1e6:.1f} us, "
                f"base {statistics.median(cpu['base']) * 1e6:.1f} us per call (medians so far)")
        med = {k: statistics.median(v) * 1e6 for k, v in cpu.items()}
        out.update({"call": args.call, "base": args.base, "files": old, "n": args.runs, "rounds": args.rounds,
                    "per_statement": args.per_statement, "cpu_us_per_call_median": med,
                    "ratio": med["this"] / med["base"],
                    "samples_us": {k: [round(x * 1e6, 1) for x in v] for k, v in cpu.items()}})
    summary = [f"report_cpu: {args.call}, {args.runs} runs x {args.rounds} rounds, {args.per_statement} calls per statement",
               f"  backend CPU per call, median: this tree {med['this']:.1f} us, {args.base} {med['base']:.1f} us "
               f"(ratio {med['this'] / med['base']:.3f})"]
    emit(args, out, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
