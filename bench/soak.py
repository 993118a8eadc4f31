"""bench/soak: a steady load for a long time; do the hot tables and the processes stay bounded?

S schedules fire every second (6-field cron, overlap 'allow'), so S runs/s go through the
real poller and relay to the bench worker, which completes each through SQL. Every
interval: runs dispatched and succeeded in the interval, fire -> dispatch lag, the size and
dead tuples of job_future and outbox (and the run table's growth), autovacuum counts, and the
RSS and CPU of the poller, relay and worker. Verdicts at the end: throughput steady, hot
tables bounded, no RSS growth, autovacuum keeping up.

  python -m bench.soak                  # 2,000 runs/s for 600 s, a sample every 60 s
  python -m bench.soak --quick          # 200 runs/s for 20 s, a sample every 5 s
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from bench.common import (
    Database, Fleet, base_report, cpu_delta, emit, extra_env, log, parse_args, postgres_cpu,
    wait_until, workdir,
)
from bench.latency import saturated
from bench.database import WaitSampler
from bench.pipeline import wait_worker, worker_stats
from cronbox.pgcluster import free_port

HOT = ["cronbox.job_future", "cronbox.outbox"]


def sample(database: Database, t_prev: float, t_now: float) -> dict[str, Any]:
    with database.connect() as conn:
        # run ids encode their creation time: the interval's runs are one index range
        dispatched, succeeded, lag_p50, lag_p99 = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE state = 'succeeded'), "
            "percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM dispatched_at - fire_at) * 1000), "
            "percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM dispatched_at - fire_at) * 1000) "
            "FROM cronbox.runs WHERE run_id >= cronbox.run_id_at(to_timestamp(%s)) "
            "AND run_id < cronbox.run_id_at(to_timestamp(%s)) AND dispatched_at IS NOT NULL",
            (t_prev, t_now)).fetchone()
        missed = conn.execute(
            "SELECT count(*) FROM cronbox.runs WHERE run_id >= cronbox.run_id_at(to_timestamp(%s)) "
            "AND run_id < cronbox.run_id_at(to_timestamp(%s)) AND state IN ('missed', 'skipped')",
            (t_prev, t_now)).fetchone()[0]
        tables = {}
        for t in HOT:
            row = conn.execute(
                "SELECT pg_total_relation_size(%s::regclass), s.n_live_tup, s.n_dead_tup, s.autovacuum_count, "
                "s.autoanalyze_count FROM pg_stat_user_tables s WHERE s.relid = %s::regclass", (t, t)).fetchone()
            tables[t] = {"bytes": row[0], "live": row[1], "dead": row[2], "autovacuums": row[3], "autoanalyzes": row[4]}
        run_bytes = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(inhrelid)), 0) FROM pg_inherits "
            "WHERE inhparent = 'cronbox.run'::regclass").fetchone()[0]
        overdue = conn.execute(
            "SELECT count(*) FROM cronbox.job_future WHERE due_at < now() - interval '2 seconds'").fetchone()[0]
    span = t_now - t_prev
    return {"dispatched_per_s": round(dispatched / span, 1), "succeeded_per_s": round(succeeded / span, 1),
            "lag_ms": {"p50": round(lag_p50 or 0, 1), "p99": round(lag_p99 or 0, 1)},
            "missed_or_skipped": missed, "tables": tables, "run_bytes": int(run_bytes), "futures_overdue": overdue}


def verdicts(samples: list[dict[str, Any]], target: float) -> dict[str, Any]:
    steady = samples[1:] or samples  # the first interval includes the ramp-up
    rates = [s["dispatched_per_s"] for s in steady]
    half = max(1, len(samples) // 2)

    def peak(rows: list[dict[str, Any]], table: str) -> int:
        return max(r["tables"][table]["bytes"] for r in rows)

    out: dict[str, Any] = {
        "throughput_steady": bool(rates) and all(abs(r - target) <= 0.1 * target for r in rates),
        "min_rate": min(rates) if rates else None, "max_rate": max(rates) if rates else None,
        "no_backlog_at_end": samples[-1]["futures_overdue"] == 0,
    }
    for t in HOT:
        first, second = peak(samples[:half], t), peak(samples[half:], t)
        # bounded: the second half's peak within 25% (+ 8 MB of slack) of the first half's;
        # a pipeline with a growing backlog is not steady, whatever its tables do
        out[f"{t}_bounded"] = second <= first * 1.25 + 8 * 2**20 and out["no_backlog_at_end"]
        out[f"{t}_peak_mb"] = round(max(first, second) / 2**20, 2)
        out[f"{t}_growth_mb"] = round((second - first) / 2**20, 2)
        out[f"{t}_autovacuums"] = samples[-1]["tables"][t]["autovacuums"] - samples[0]["tables"][t]["autovacuums"]
    for p in ("poller", "relay"):
        rss = [s["rss_mb"].get(p) for s in samples if s["rss_mb"].get(p) is not None]
        if rss:
            out[f"{p}_rss_mb"] = {"first": rss[0], "last": rss[-1], "max": max(rss)}
            out[f"{p}_rss_under_150mb"] = max(rss) < 150
            # growth over the second half; the first intervals include warm-up allocations
            out[f"{p}_rss_growth_mb"] = round(rss[-1] - rss[min(half, len(rss) - 1)], 1)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="cronbox soak: steady load, bounded tables and memory")
    p.add_argument("--rate", type=int, help="runs per second = schedules firing every second (default 2,000; quick 200)")
    p.add_argument("--seconds", type=int, help="duration (default 600; quick 20)")
    p.add_argument("--every", type=float, help="sample interval in seconds (default 60; quick 5)")
    p.add_argument("--mode", choices=("report-sql", "respond"), default="respond",
                   help="how the worker completes runs (see bench/worker.py; default respond)")
    p.add_argument("--http-batch", type=int, default=100,
                   help="messages per HTTP request (the route's batch=N, default 100; 1 = one POST per message)")
    p.add_argument("--report-tx", choices=("per-run", "batch"), default="per-run",
                   help="report-sql mode: a transaction per run or per batch")
    args = parse_args(p, argv)
    rate = args.rate or (200 if args.quick else 2000)
    seconds = args.seconds or (20 if args.quick else 600)
    every = args.every or (5.0 if args.quick else 60.0)

    with Database(args, "soak") as database, workdir("soak") as logdir:
        report = base_report("soak", args, database, argv)
        report.update({"rate": rate, "seconds": seconds, "every": every, "mode": args.mode,
                       "http_batch": args.http_batch})
        with database.connect() as conn:
            conn.execute("SELECT cronbox.schedule('soak-0', cron => '* * * * * *', overlap => 'allow')")
        database.clone_jobs("soak-0", "soak-", rate - 1)
        port = free_port()
        env = {"CRONBOX_SINKS": f"*=http://127.0.0.1:{port}/run batch={args.http_batch}", **extra_env(args)}
        samples: list[dict[str, Any]] = []
        with Fleet(logdir) as fleet:
            fleet.worker(database.dsn, port, args.mode, "--report-tx", args.report_tx)
            wait_worker(port, fleet)
            fleet.cronbox("poller", database.dsn, env)
            fleet.cronbox("relay", database.dsn, env)
            wait_until(lambda: fleet.check_alive() or saturated(database, 60), 600, "saturation")
            log(f"saturated; soaking {seconds} s at {rate} runs/s")
            start = time.time()
            cpu_prev, pg_prev, c_prev = fleet.cpu(), postgres_cpu(database.postmaster), start
            b_prev, k = start, 0
            waits = WaitSampler(database, interval=0.25).__enter__()
            while b_prev < start + seconds - 0.01:
                k += 1
                b = min(start + k * every, start + seconds)
                # sample one second after the boundary: runs that fired just before it are in flight
                while time.time() < b + 1.0:
                    fleet.check_alive()
                    time.sleep(0.1)
                c_now, cpu_now, pg_now = time.time(), fleet.cpu(), postgres_cpu(database.postmaster)
                s = sample(database, b_prev, b)
                s["t"] = round(b - start, 1)
                s["rss_mb"] = fleet.rss()
                s["cpu_s_per_s"] = {k2: round(v / (c_now - c_prev), 3) for k2, v in cpu_delta(cpu_prev, cpu_now).items()}
                if pg_prev is not None and pg_now is not None:
                    s["cpu_s_per_s"]["postgres"] = round((pg_now - pg_prev) / (c_now - c_prev), 3)
                samples.append(s)
                log(f"t={s['t']}s dispatched {s['dispatched_per_s']}/s succeeded {s['succeeded_per_s']}/s "
                    f"lag p99 {s['lag_ms']['p99']} ms future {s['tables']['cronbox.job_future']['bytes'] // 1024} kB "
                    f"outbox {s['tables']['cronbox.outbox']['bytes'] // 1024} kB rss {s['rss_mb']}")
                b_prev, cpu_prev, pg_prev, c_prev = b, cpu_now, pg_now, c_now
            waits.__exit__()
            report["server_waits"] = waits.top()
            report["worker"] = worker_stats(port)
        report["samples"] = samples
        report["verdicts"] = verdicts(samples, rate)
        report["sizes_end"] = database.table_sizes(["cronbox.job_future", "cronbox.outbox", "cronbox.run"])
    emit(args, report, summary(report))
    return 0


def summary(r: dict[str, Any]) -> list[str]:
    v = r["verdicts"]
    lines = [f"soak: {r['rate']} runs/s for {r['seconds']} s, {'durable' if r['durable'] else 'NOT durable'}",
             f"  rate per interval: min {v['min_rate']}, max {v['max_rate']} (steady within 10%: {v['throughput_steady']}); "
             f"backlog at end: {not v['no_backlog_at_end']}"]
    for t in HOT:
        lines.append(f"  {t}: peak {v[f'{t}_peak_mb']} MB (2nd half - 1st half peak {v[f'{t}_growth_mb']} MB), "
                     f"bounded {v[f'{t}_bounded']}, autovacuums {v[f'{t}_autovacuums']}")
    for p in ("poller", "relay"):
        if f"{p}_rss_mb" in v:
            lines.append(f"  {p} RSS MB {v[f'{p}_rss_mb']}, growth over 2nd half {v[f'{p}_rss_growth_mb']} MB")
    return lines


if __name__ == "__main__":
    sys.exit(main())
