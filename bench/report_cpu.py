"""The server CPU of a single report (`complete_run`, one run per call), this tree against the
functions of a git revision, interleaved in one cluster.

Two databases of one private cluster, both migrated by this tree; in the second, the function
files that differ from `--base` (sql/functions/**) are re-applied as they were at that revision
(CREATE OR REPLACE: the schema is this tree's, so only function bodies are compared). Each
round, in each database: N one-off jobs (overlap 'allow'), dispatched, claimed and acked
delivered, then `complete_run` once per run, `--per-statement` calls in one statement; the
backend's CPU time (utime + stime from /proc) around each statement, per call. The order of the
two databases alternates every round. CPU time, not wall time: on a shared machine it moves far
less with the load than the elapsed time does (cache and frequency effects remain).

    python -m bench.report_cpu --base HEAD~1
    python -m bench.report_cpu --base 7070da5 --rounds 6 -n 2000
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
from pathlib import Path

from bench.common import CLK_TCK, REPO, Database, base_report, emit, log, parse_args
from cronbox import db
from cronbox.migrate import migrate


def backend_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def old_functions(base: str) -> list[tuple[str, str]]:
    """(path, text at base) of the function files that differ from base and existed there."""
    names = subprocess.run(["git", "diff", "--name-only", base, "--", "sql/functions"], cwd=REPO,
                           check=True, capture_output=True, text=True).stdout.split()
    out = []
    for name in names:
        shown = subprocess.run(["git", "show", f"{base}:{name}"], cwd=REPO, capture_output=True, text=True)
        if shown.returncode == 0:
            out.append((name, shown.stdout))
    return out


def delivered_runs(dsn: str, n: int) -> list[int]:
    """n one-off jobs due now, dispatched, claimed and acked delivered: their run ids."""
    with db.connect(dsn) as conn:
        conn.execute("DELETE FROM cronbox.job WHERE name LIKE 'rc-%'")
        conn.execute(
            "INSERT INTO cronbox.job (name, kind, at, frontier, next_fire, finished_at, overlap) "
            "SELECT 'rc-' || i, 'at', now(), now(), NULL, now(), 'allow' FROM generate_series(1, %s) AS i", (n,))
        conn.execute("INSERT INTO cronbox.job_future (job_id, fire_at, due_at) "
                     "SELECT job_id, at, now() FROM cronbox.job WHERE name LIKE 'rc-%'")
        conn.execute("ANALYZE cronbox.job")
        while conn.execute("SELECT dispatched FROM cronbox.dispatch(1000)").fetchone()[0]:
            pass
        runs: list[int] = []
        while rows := conn.execute("SELECT outbox_id, run_id FROM cronbox.claim_outbox('rc', 1000)").fetchall():
            conn.execute("SELECT cronbox.ack_outbox('rc', %s, NULL)", ([o for o, _ in rows],))
            runs += [r for _, r in rows]
    return runs


def report(dsn: str, runs: list[int], per: int) -> list[float]:
    """CPU seconds per complete_run call, one figure per statement of `per` calls."""
    out = []
    with db.connect(dsn) as conn:
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        for i in range(0, len(runs), per):
            chunk = runs[i:i + per]
            before = backend_cpu(pid)
            done = conn.execute("SELECT count(*) FROM unnest(%s::bigint[]) AS u(id) "
                                "WHERE cronbox.complete_run(u.id) = 'succeeded'", (chunk,)).fetchone()[0]
            out.append((backend_cpu(pid) - before) / len(chunk))
            if done != len(chunk):
                raise SystemExit(f"{done} of {len(chunk)} reports succeeded")
        while conn.execute("SELECT cronbox.fold_job_stats(10000)").fetchone()[0]:
            pass
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="cronbox: backend CPU of one complete_run, this tree vs --base")
    p.add_argument("--base", required=True, help="git revision whose function bodies are compared")
    p.add_argument("-n", "--runs", type=int, default=2000, help="runs per database per round")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--per-statement", type=int, default=100, help="complete_run calls per statement")
    args = parse_args(p, argv)
    old = old_functions(args.base)
    with Database(args, "report-cpu") as database:
        out = base_report("report_cpu", args, database, argv)
        with db.connect(database.dsn) as conn:
            conn.execute("CREATE DATABASE base")
        base_dsn = database.dsn.replace("/bench", "/base")
        migrate(base_dsn)
        with db.connect(base_dsn) as conn:
            for _, text in old:
                conn.execute(text)
        log(f"base {args.base}: {len(old)} function files as they were: {', '.join(n for n, _ in old)}")
        cpu: dict[str, list[float]] = {"this": [], "base": []}
        for rnd in range(args.rounds):
            order = [("this", database.dsn), ("base", base_dsn)]
            for name, dsn in order if rnd % 2 == 0 else order[::-1]:
                runs = delivered_runs(dsn, args.runs)
                cpu[name] += report(dsn, runs, args.per_statement)
            log(f"round {rnd + 1}: this {statistics.median(cpu['this']) * 1e6:.1f} us, "
                f"base {statistics.median(cpu['base']) * 1e6:.1f} us per call (medians so far)")
        med = {k: statistics.median(v) * 1e6 for k, v in cpu.items()}
        out.update({"base": args.base, "files": [n for n, _ in old], "n": args.runs, "rounds": args.rounds,
                    "per_statement": args.per_statement, "cpu_us_per_call_median": med,
                    "ratio": med["this"] / med["base"],
                    "samples_us": {k: [round(x * 1e6, 1) for x in v] for k, v in cpu.items()}})
    summary = [f"report_cpu: complete_run, {args.runs} runs x {args.rounds} rounds, {args.per_statement} calls per statement",
               f"  backend CPU per call, median: this tree {med['this']:.1f} us, {args.base} {med['base']:.1f} us "
               f"(ratio {med['this'] / med['base']:.3f})"]
    emit(args, out, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
