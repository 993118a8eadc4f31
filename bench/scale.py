"""bench/scale: many active schedules (mixed cron / interval, random time zones).

  1. insert: a sample through cronbox.schedule() (its rate is reported), the rest set-based
     straight into cronbox.job as schedule() would leave them (cronbox.job_fire: frontier = next_fire = now);
  2. saturate: a real `cronbox poller` fills the horizon from empty; time to saturate,
     futures/s, poller CPU per future; then a steady window, starting 1 s before a minute
     boundary (cron fires burst there): fires dispatched/s, poller CPU per fire, fire ->
     dispatch lag (no relay runs: the outbox just grows); the window is valid only if fires
     came due in it and >= 95 % of them were dispatched;
  3. dispatch cost vs job_future size: job_future is filled to each size (rows due later,
     plus a few batches due now, of jobs with no unfinished run) and one
     cronbox.dispatch(batch) is timed, median of several, with the plans of its statements
     (auto_explain: ANALYZE, BUFFERS); valid only if every timed call moved a full batch;
  4. table and index sizes.

A figure whose setup did not hold is reported as such ("setup held: False" and the reasons)
and the script exits 1: it never prints a number that measured something else.

  python -m bench.scale                                  # 1,000,000 schedules; 10k/1M/10M futures
  python -m bench.scale --quick                          # 10,000 schedules; 10k/50k futures
  python -m bench.scale --schedules 200000 --future-sizes 10000,1000000
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

from bench import burst
from bench.common import (
    Database, Fleet, base_report, emit, extra_env, log, parse_args, pct, postgres_cpu, py_spy_collect,
    py_spy_record, wait_until, workdir,
)
from bench.database import ADD_JOB_ROWS, WaitSampler

# (kind, expression, weight out of 20): about 2,900 fires/s per million schedules.
MIX = [
    ("cron", "* * * * *", 2), ("cron", "*/5 * * * *", 3), ("cron", "0 * * * *", 4),
    ("cron", "30 2 * * *", 3), ("every", "5 minutes", 3), ("every", "15 minutes", 3),
    ("every", "1 hour", 2),
]
# --mix every-minute: the steady state, a million schedules firing every minute (16.7k fires/s)
MIXES = {"default": MIX, "every-minute": [("cron", "* * * * *", 20)]}
ZONES = ["UTC", "Europe/Berlin", "Europe/London", "America/New_York", "America/Los_Angeles",
         "America/Sao_Paulo", "Asia/Tokyo", "Asia/Kolkata", "Asia/Shanghai", "Australia/Sydney",
         "Africa/Johannesburg", "Pacific/Auckland", "Asia/Kathmandu", "America/St_Johns",
         "Europe/Moscow", "Pacific/Chatham"]
TABLES = ["cronbox.job", "cronbox.job_future", "cronbox.outbox", "cronbox.run"]

# i -> (kind, expression) and time zone, the same in SQL for both insert paths
MIX_SQL = """
WITH mix(k, kind, expr, lo, hi) AS (VALUES {values}),
     zones(z) AS (SELECT ARRAY[{zones}])
SELECT i, m.kind, m.expr, (SELECT z FROM zones)[1 + (hashint4(i) & 2147483647) %% {nz}] AS tz
FROM generate_series(%(first)s::int, %(last)s::int) AS i
JOIN mix m ON (i::bigint * 7919) %% 20 >= m.lo AND (i::bigint * 7919) %% 20 < m.hi
"""


def mix_sql() -> str:
    values, lo = [], 0
    for k, (kind, expr, w) in enumerate(MIX):
        values.append(f"({k}, '{kind}', '{expr}', {lo}, {lo + w})")
        lo += w
    return MIX_SQL.format(values=", ".join(values), zones=", ".join(f"'{z}'" for z in ZONES), nz=len(ZONES))


def insert_schedules(database: Database, n: int, sample: int) -> dict[str, Any]:
    src = mix_sql()
    out: dict[str, Any] = {}
    sample = min(sample, n)
    with database.connect() as conn:
        t0 = time.monotonic()
        conn.execute(
            f"SELECT count(cronbox.schedule('s' || s.i, cron => CASE WHEN s.kind = 'cron' THEN s.expr END, "
            f"every => CASE WHEN s.kind = 'every' THEN s.expr::interval END, timezone => s.tz)) FROM ({src}) s",
            {"first": 1, "last": sample})
        dt = time.monotonic() - t0
        out["schedule_fn"] = {"count": sample, "seconds": round(dt, 2), "per_s": round(sample / dt, 1)}
        if n > sample:
            t0 = time.monotonic()
            conn.execute(
                f"""INSERT INTO cronbox.job (name, kind, cron, cron_normalized, every, anchor, timezone)
                    SELECT 's' || s.i, s.kind, CASE WHEN s.kind = 'cron' THEN s.expr END, nc.norm,
                           CASE WHEN s.kind = 'every' THEN s.expr::interval END,
                           -- anchors spread over the interval, as schedules made at different
                           -- times are: interval fires come steadily, not all 5 minutes from now
                           CASE WHEN s.kind = 'every' THEN now() + s.expr::interval
                                * ((hashint4(s.i * 31) & 1023) + 1) / 1024.0 END,
                           s.tz
                    FROM ({src}) s
                    LEFT JOIN (SELECT expr, cronbox.normalize_cron(expr) AS norm
                               FROM (VALUES {", ".join(f"('{e}')" for k, e, _ in MIX if k == 'cron')}) v(expr)) nc
                           ON s.kind = 'cron' AND nc.expr = s.expr""",
                {"first": sample + 1, "last": n})
            conn.execute(ADD_JOB_ROWS)
            # what schedule() leaves: nothing materialised yet, frontier = next_fire = now
            conn.execute("UPDATE cronbox.job_fire SET frontier = now(), next_fire = now() WHERE next_fire IS NULL")
            dt = time.monotonic() - t0
            out["bulk"] = {"count": n - sample, "seconds": round(dt, 2), "per_s": round((n - sample) / dt, 1)}
        conn.execute("VACUUM ANALYZE cronbox.job, cronbox.job_fire")
    out["by_kind"] = dict(database.connect().execute(
        "SELECT coalesce(cron, every::text), count(*) FROM cronbox.job GROUP BY 1 ORDER BY 1").fetchall())
    return out


def unsaturated(database: Database, slack: float) -> int:
    """Jobs with less than half the horizon materialised (minus slack): the poller refills a
    job to the full horizon once its next fire comes within half of it, so a saturated job's
    next fire lies between now + horizon/2 and now + horizon."""
    return database.scalar(
        "SELECT count(*) FROM cronbox.job_fire WHERE next_fire IS NOT NULL AND NOT paused "
        "AND next_fire <= now() + %s::interval / 2 - make_interval(secs => %s)", (HORIZON, slack))


def saturated(database: Database, slack: float) -> bool:
    """The cheap form for polling: one probe of job_saturate_idx (a count over a million
    jobs every half second would load the server the bench measures)."""
    return not database.scalar(
        "SELECT EXISTS (SELECT 1 FROM cronbox.job_fire WHERE next_fire IS NOT NULL AND NOT paused "
        "AND next_fire <= now() + %s::interval / 2 - make_interval(secs => %s))", (HORIZON, slack))


HORIZON = "2 minutes"


def reset_to_empty(database: Database, spread: float = 0.0) -> None:
    """Every job back to the state schedule() leaves (nothing materialised, frontier = next_fire
    = its creation time: now, or with `spread` a moment in the last `spread` seconds, as for
    schedules created at different moments), so the next saturation starts from empty again."""
    with database.connect() as conn:
        conn.execute("TRUNCATE cronbox.job_future, cronbox.outbox, cronbox.run")
        conn.execute("UPDATE cronbox.job_stat SET active_runs = 0, last_run_id = NULL, last_run_state = NULL "
                     "WHERE active_runs <> 0 OR last_run_id IS NOT NULL")
        at = "now() - make_interval(secs => %(spread)s * (hashint8(job_id) & 65535) / 65536.0)"
        conn.execute(f"UPDATE cronbox.job_fire SET frontier = {at}, next_fire = {at}, fires_made = 0", {"spread": spread})
        conn.execute("VACUUM ANALYZE cronbox.job, cronbox.job_fire")


def saturate_from_empty(database: Database, args: argparse.Namespace, fleet: Fleet, pollers: int,
                        env: dict[str, str], logdir: Any) -> dict[str, Any]:
    """Start `pollers` pollers on an empty job_future and time them until every job is saturated.
    With --profile: py-spy on each poller, pg_stat_statements (track=all) and the server's
    backends sampled, over the same interval."""
    names = ["poller"] + [f"poller{i}" for i in range(2, pollers + 1)]
    spies: dict[str, tuple[Any, Any]] = {}
    if args.profile:
        database.set_statement_tracking("all")
        database.reset_statements()
    t0 = time.monotonic()
    procs = [fleet.cronbox("poller", database.dsn, env, name=n) for n in names]
    pg0 = postgres_cpu(database.postmaster)
    if args.profile:
        for p in procs:
            out = logdir / f"pyspy-{p.name}.txt"
            sp = py_spy_record(p.pid, 3600, out)
            if sp is not None:
                spies[p.name] = (sp, out)
    with WaitSampler(database, interval=0.2) as waits:
        wait_until(lambda: (fleet.check_alive() or saturated(database, 5.0)), args.timeout,
                   "saturation", interval=0.5)
    dt = time.monotonic() - t0
    cpu = {p.name: round(p.cpu(), 2) for p in procs}
    pg1 = postgres_cpu(database.postmaster)
    with database.connect() as conn:
        futures, runs = conn.execute(
            "SELECT (SELECT count(*) FROM cronbox.job_future), (SELECT count(*) FROM cronbox.runs)").fetchone()
    made = futures + runs  # futures written so far (some already dispatched)
    total_cpu = sum(cpu.values())
    res: dict[str, Any] = {
        "pollers": pollers, "seconds": round(dt, 2), "futures_written": made,
        "futures_per_s": round(made / dt, 1), "schedules_per_s": round(args.n / dt, 1),
        "poller_cpu_s": cpu, "poller_cpu_ms_per_future": round(1000 * total_cpu / max(made, 1), 4),
        "postgres_cpu_s": round(pg1 - pg0, 2) if pg0 is not None and pg1 is not None else None,
        "server_waits": waits.top(8),
    }
    if res["postgres_cpu_s"] is not None:
        res["cpu_split"] = {"pollers_s_per_s": round(total_cpu / dt, 2),
                            "postgres_s_per_s": round(res["postgres_cpu_s"] / dt, 2)}
    if spies:
        res["py_spy"] = py_spy_collect(spies, top=25)
    if args.profile:
        res["statements"] = database.top_statements(20)
        database.set_statement_tracking("top")
    log(f"{pollers} poller(s) saturated in {dt:.1f} s: {made} futures ({made / dt:.0f}/s)")
    return res


def saturate_and_steady(database: Database, args: argparse.Namespace, logdir: Any, steady: float) -> dict[str, Any]:
    out: dict[str, Any] = {"saturation_runs": []}
    env = {"CRONBOX_HORIZON": args.horizon, **extra_env(args)}
    counts = [int(x) for x in args.pollers.split(",")]
    for i, count in enumerate(counts):
        if i:
            reset_to_empty(database)
        fleet = Fleet(logdir)
        try:
            out["saturation_runs"].append(saturate_from_empty(database, args, fleet, count, env, logdir))
        except BaseException:
            fleet.stop()
            raise
        if i < len(counts) - 1:
            fleet.stop()
    runs = out["saturation_runs"]
    out["saturation"] = {**runs[-1], "poller_cpu_s": sum(runs[-1]["poller_cpu_s"].values())}
    if len(runs) > 1:
        one = next((r for r in runs if r["pollers"] == 1), None)
        if one is not None:
            out["pollers_ratio"] = {str(r["pollers"]): round(r["futures_per_s"] / one["futures_per_s"], 2)
                                    for r in runs}
    with fleet:
        poller = fleet.procs["poller"]
        # Workers that finish the runs (pull mode: claim_runs + complete_runs through the SQL
        # API, bench/pull_worker.py), so a 'skip' job's next fire finds no run of it unfinished
        # (without them every 'skip' job keeps its first run in flight and each later fire is
        # skipped). Started after saturation; the window then starts a minute later, once the
        # runs dispatched during saturation are done and the next burst was decided with them.
        for i in range(args.pull_workers):
            fleet.python(f"pull{i}", "bench.pull_worker", database.dsn, "--batch", "1000")
        log(f"steady window {steady:.0f} s with {len(fleet.procs)} process(es)")
        # Cron fires come in bursts on minute boundaries: start the window one second before
        # the next boundary (database clock), so every window holds at least one burst.
        time.sleep(database.scalar(
            "SELECT ((59 - extract(epoch FROM now() - date_trunc('minute', now())) + 60) % 60)::float8")
            + (60 if args.pull_workers else 0))
        if args.profile:
            database.set_statement_tracking("all")
            database.reset_statements()
        c0, pg0 = sum(fleet.cpu().values()), postgres_cpu(database.postmaster)
        w0 = database.scalar("SELECT now()")
        with WaitSampler(database, interval=0.2) as waits:
            time.sleep(steady)
        fleet.check_alive()
        c1, pg1 = sum(fleet.cpu().values()), postgres_cpu(database.postmaster)
        # The window's end, read at once: the reads below take seconds at 100,000 schedules, and
        # an end read after them fell past the next minute boundary (every-minute mix), counting
        # its burst as due in the window with a second or two to go.
        w1 = database.scalar("SELECT now()")
        left_unsaturated = unsaturated(database, 5.0)
        if args.profile:
            out["steady_statements"] = database.top_statements(60)
            database.set_statement_tracking("top")
        out["steady_waits"] = waits.top(10)
        with database.connect() as conn:
            lags = [float(r[0]) for r in conn.execute(
                "SELECT extract(epoch FROM dispatched_at - fire_at) * 1000 FROM cronbox.runs "
                "WHERE dispatched_at >= %s AND state <> 'missed'", (w0,)).fetchall()]
            # Decided: dispatched, or skipped by overlap 'skip' (no relay runs here, so a job's
            # earlier run stays unfinished and its next fires are skipped: decided at finished_at)
            decided = [float(r[0]) for r in conn.execute(
                "SELECT extract(epoch FROM coalesce(dispatched_at, finished_at) - fire_at) * 1000 FROM cronbox.runs "
                "WHERE (dispatched_at >= %(w0)s OR (state = 'skipped' AND finished_at >= %(w0)s))",
                {"w0": w0}).fetchall()]
            # Fire -> decided as it really was: a run's id carries its creation time
            # (cronbox.new_run_id: epoch ms << 20), where dispatched_at of a run decided early is
            # its due time; a fire decided before its time counts 0 (ready at its time), a
            # skipped one its finished_at; the fires of the window only (the next burst, decided
            # ahead within it, is not). Fire -> started: a pull worker's claim (the receipt).
            real = conn.execute(
                "SELECT extract(epoch FROM greatest(to_timestamp((run_id >> 20) / 1000.0), fire_at) - fire_at) * 1000, "
                "       to_timestamp((run_id >> 20) / 1000.0) < fire_at, "
                "       extract(epoch FROM started_at - fire_at) * 1000 "
                "FROM cronbox.runs WHERE fire_at >= %(w0)s AND fire_at < %(w1)s AND state NOT IN ('missed', 'skipped') "
                "UNION ALL SELECT extract(epoch FROM finished_at - fire_at) * 1000, false, NULL FROM cronbox.runs "
                "WHERE state = 'skipped' AND fire_at >= %(w0)s AND fire_at < %(w1)s", {"w0": w0, "w1": w1}).fetchall()
            behind = conn.execute(
                "SELECT count(*) FROM cronbox.job_future WHERE due_at < %s - interval '1 second'", (w1,)).fetchone()[0]
            # Fires that came due in the window, at least 2 s before its end (dispatched or not):
            # the window measures something only if they were there and went out.
            due = conn.execute(
                "SELECT (SELECT count(*) FROM cronbox.runs WHERE fire_at >= %(w0)s "
                "        AND fire_at < %(w1)s - interval '2 seconds' AND state <> 'missed') "
                "     + (SELECT count(*) FROM cronbox.job_future WHERE due_at >= %(w0)s "
                "        AND due_at < %(w1)s - interval '2 seconds')", {"w0": w0, "w1": w1}).fetchone()[0]
            went = conn.execute(
                "SELECT count(*) FROM cronbox.runs WHERE fire_at >= %(w0)s "
                "AND fire_at < %(w1)s - interval '2 seconds' AND state <> 'missed'", {"w0": w0, "w1": w1}).fetchone()[0]
            span = conn.execute("SELECT min(fire_at), max(fire_at), min(dispatched_at), max(dispatched_at) "
                                "FROM cronbox.runs WHERE dispatched_at >= %s AND state <> 'missed'", (w0,)).fetchone()
        fires = len(lags)
        out["steady_setup"] = {
            "window": [str(w0), str(w1)], "fire_at_span": [str(x) for x in span],
            "fires_due": due, "of_which_dispatched": went,
            "held": due > 0 and went >= 0.95 * due,
            "why": None if due > 0 and went >= 0.95 * due else
                   ("no fire came due in the window" if due == 0 else
                    f"only {went} of {due} fires due in the window were dispatched: the poller was behind"),
        }
        out["steady"] = {
            "seconds": steady, "fires_dispatched": fires, "fires_per_s": round(fires / steady, 1),
            "fires_decided": len(decided), "fires_decided_per_s": round(len(decided) / steady, 1),
            "fire_to_decision_ms": {"p50": pct(decided, 50), "p99": pct(decided, 99),
                                    "max": max(decided) if decided else None},
            "poller_cpu_s_per_s": round((c1 - c0) / steady, 3),
            "poller_cpu_ms_per_fire": round(1000 * (c1 - c0) / fires, 4) if fires else None,
            "postgres_cpu_ms_per_fire": round(1000 * (pg1 - pg0) / fires, 4) if fires and pg0 is not None else None,
            # per fire decided (dispatched or skipped): a window whose burst is all skipped for
            # overlap (its jobs' first runs dispatched during saturation) dispatches none
            "postgres_cpu_ms_per_decision": (round(1000 * (pg1 - pg0) / len(decided), 4)
                                             if decided and pg0 is not None else None),
            "fire_to_dispatch_ms": {"p50": pct(lags, 50), "p99": pct(lags, 99), "max": max(lags) if lags else None},
            "fire_to_decided_real_ms": {"p50": pct([r[0] for r in real], 50), "p99": pct([r[0] for r in real], 99),
                                        "max": max((r[0] for r in real), default=None)},
            "decided_before_their_time": sum(1 for r in real if r[1]),
            "fire_to_started_ms": {"n": len(started := [r[2] for r in real if r[2] is not None]),
                                   "p50": pct(started, 50), "p99": pct(started, 99)},
            "pull_workers": args.pull_workers,
            "futures_overdue_at_end": behind,
            "unsaturated_jobs_at_end": left_unsaturated,
            "poller_rss_mb": poller.rss(),
        }
    return out


def dispatch_cost(database: Database, sizes: list[int], batch: int, reps: int) -> list[dict[str, Any]]:
    """Time cronbox.dispatch(batch) with job_future at each size (rows due later + reps batches due now)."""
    results = []
    with database.connect() as conn:
        # The steady window left runs unfinished (no relay ran): under overlap 'skip' their jobs'
        # new fires would be skipped, not dispatched, and the timing would measure less work.
        conn.execute("TRUNCATE cronbox.job_future")
        free_jobs(conn)
        conn.execute("VACUUM ANALYZE cronbox.job")
        njobs = conn.execute("SELECT count(*) FROM cronbox.job").fetchone()[0]
        conn.execute("CREATE TEMP TABLE ids AS SELECT row_number() OVER () - 1 AS k, job_id FROM cronbox.job")
        conn.execute("CREATE INDEX ON ids (k)")
        have = 0
        for size in sizes:
            add = size - have - (reps + 1) * batch  # reps timed batches + one explained
            if add > 0:
                t0 = time.monotonic()
                # bench-only shortcut: skip the FK trigger for the bulk fill (job ids are real)
                conn.execute("SET session_replication_role = replica")
                conn.execute(
                    "INSERT INTO cronbox.job_future (job_id, fire_at, due_at) "
                    "SELECT ids.job_id, now() + interval '1 day' + make_interval(secs => g), "
                    "       now() + interval '1 day' + make_interval(secs => g) "
                    "FROM generate_series(%s::bigint, %s::bigint) g JOIN ids ON ids.k = g %% %s",
                    (have + 1, have + add, njobs))
                conn.execute("SET session_replication_role = origin")
                have += add
                log(f"job_future filled to {have} rows (+{add} in {time.monotonic() - t0:.1f} s)")
            free_jobs(conn)  # the previous size's runs would make these jobs busy
            conn.execute("VACUUM ANALYZE cronbox.job_future")
            conn.execute(
                "INSERT INTO cronbox.job_future (job_id, fire_at, due_at) "
                "SELECT ids.job_id, now() - interval '1 hour' + make_interval(secs => g), now() - interval '1 second' "
                "FROM generate_series(1, %s::bigint) g JOIN ids ON ids.k = g %% %s", ((reps + 1) * batch, njobs))
            times, moved = [], []
            for _ in range(reps):
                t0 = time.perf_counter()
                n, other = conn.execute("SELECT dispatched, skipped + failed + held FROM cronbox.dispatch(%s)",
                                        (batch,)).fetchone()
                times.append(1000 * (time.perf_counter() - t0))
                moved.append((n, other))
                if n != batch:
                    log(f"setup did not hold: dispatch moved {n} (and decided {other} otherwise), not {batch}")
            plans = explain_dispatch(conn, batch)
            results.append({
                "job_future_rows": have + (reps + 1) * batch, "batch": batch,
                "dispatch_ms": {"median": round(statistics.median(times), 2), "min": round(min(times), 2),
                                "max": round(max(times), 2), "n": len(times)},
                "per_run_us": round(1000 * statistics.median(times) / batch, 2),
                "moved": [m for m, _ in moved], "decided_otherwise": [o for _, o in moved],
                "setup_held": all(m == batch for m, _ in moved),
                "plans": plans,
                "sizes": database.table_sizes(["cronbox.job_future"]),
            })
    return results


def free_jobs(conn: psycopg.Connection) -> None:
    """No unfinished runs: a timed dispatch then moves every due fire (none skipped for
    overlap). The steady window and each earlier size leave dispatched runs behind (no relay)."""
    conn.execute("TRUNCATE cronbox.outbox, cronbox.run")
    conn.execute("UPDATE cronbox.job_stat SET active_runs = 0, last_run_id = NULL, last_run_state = NULL "
                 "WHERE active_runs <> 0 OR last_run_id IS NOT NULL")


def explain_dispatch(conn: psycopg.Connection, batch: int) -> list[dict[str, Any]]:
    """One more dispatch with auto_explain (ANALYZE, BUFFERS) on every statement inside it."""
    notices: list[str] = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    try:
        conn.execute("LOAD 'auto_explain'")
        for k, v in (("log_min_duration", "0"), ("log_analyze", "on"), ("log_buffers", "on"),
                     ("log_nested_statements", "on"), ("log_level", "notice"), ("log_timing", "on")):
            conn.execute(f"SET auto_explain.{k} = {v}")
        conn.execute("SELECT dispatched FROM cronbox.dispatch(%s)", (batch,))
    except psycopg.Error as exc:
        return [{"error": str(exc).strip()}]
    finally:
        with_reset = ("log_min_duration", "-1")
        conn.execute(f"SET auto_explain.{with_reset[0]} = {with_reset[1]}")
    plans = []
    for text in notices:
        body = text.split("\n")
        try:
            ms = float(body[0].split("duration:")[1].split("ms")[0])
        except (IndexError, ValueError):
            continue
        if not any("->" in ln for ln in body):
            continue  # a bare call of a wrapper (dispatch -> dispatch_at -> dispatch_locked): no table work
        first_buf = next((ln.strip() for ln in body if "Buffers:" in ln), None)
        plans.append({"ms": ms, "top_buffers": first_buf, "plan": "\n".join(body[:600])})
    # the statements that touch tables, slowest first; not the wrapper calls nor the per-row id draws
    return sorted(plans, key=lambda p: -p["ms"])[:3]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="cronbox at scale: saturation, dispatch cost vs table size, sizes")
    p.add_argument("--schedules", type=int, help="active schedules (default 1,000,000; quick 10,000)")
    p.add_argument("--sample", type=int, help="of which through cronbox.schedule() (default 1,000; quick 100)")
    p.add_argument("--future-sizes", help="job_future sizes for the dispatch cost (default 10000,1000000,10000000; "
                                          "quick 10000,50000)")
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--dispatch-reps", type=int, default=5, help="timed dispatch calls per size (then one more "
                                                                   "with its plans)")
    p.add_argument("--pollers", default="1", help="saturate from empty with each of these poller counts in turn "
                                                   "(e.g. 1,2: the ratio in the same run); the steady window "
                                                   "runs with the last")
    p.add_argument("--profile", action="store_true",
                   help="during saturation: py-spy on the pollers, pg_stat_statements (track=all), backend waits; "
                        "during the steady window: pg_stat_statements (track=all)")
    p.add_argument("--steady", type=float, help="seconds of steady state after saturation (default 60; quick 5)")
    p.add_argument("--mix", choices=sorted(MIXES), default="default",
                   help="the schedules: bench.scale's mix (~2,900 fires/s per million) or all '* * * * *' "
                        "(16,700 fires/s per million)")
    p.add_argument("--horizon", default="2m", help="CRONBOX_HORIZON for the poller (default 2m, the product's)")
    p.add_argument("--timeout", type=float, default=3600, help="give up saturating after this many seconds")
    p.add_argument("--saturate-rate", type=float,
                   help="with --burst: futures/s assumed when choosing the boundary (default 800, safe on a "
                        "loaded machine; a higher one shortens the run, and a boundary that comes too soon is "
                        "refused as setup not held)")
    p.add_argument("--pull-workers", type=int, default=0,
                   help="pull-mode workers (bench/pull_worker.py) finishing the runs during the steady window, "
                        "which then starts a minute after saturation (default 0: no run finishes)")
    p.add_argument("--function-file", action="append", default=[], metavar="FILE",
                   help="a SQL function file applied after migrate, as psql -f would (e.g. another revision's "
                        "sql/functions/internal/dispatch_ahead_at.sql, for an A/B on one build)")
    p.add_argument("--burst", type=int, help="instead: N schedules sharing one minute boundary, fire -> dispatch "
                                            "with two pollers (bench/burst.py)")
    args = parse_args(p, argv)
    if args.burst:
        return main_burst(args, argv)
    n = args.n = args.schedules or (10_000 if args.quick else 1_000_000)
    sample = args.sample or (100 if args.quick else 1000)
    sizes = [int(x) for x in (args.future_sizes or ("10000,50000" if args.quick else "10000,1000000,10000000")).split(",")]
    steady = args.steady or (5.0 if args.quick else 60.0)
    global HORIZON, MIX
    MIX = MIXES[args.mix]
    from cronbox.config import parse_duration
    HORIZON = f"{parse_duration('--horizon', args.horizon).total_seconds()} seconds"

    with Database(args, "scale") as database, workdir("scale") as logdir:
        report = base_report("scale", args, database, argv)
        report.update({"schedules": n, "horizon": HORIZON, "mix": MIX, "zones": len(ZONES)})
        for f in args.function_file:
            with database.connect() as conn:
                conn.execute(Path(f).read_text())
                conn.commit()
        report["function_files"] = args.function_file
        log(f"inserting {n} schedules ({sample} through cronbox.schedule())")
        report["insert"] = insert_schedules(database, n, sample)
        report["sizes_jobs"] = database.table_sizes(["cronbox.job"])
        report.update(saturate_and_steady(database, args, logdir, steady))
        report["sizes_saturated"] = database.table_sizes(TABLES)
        log(f"dispatch cost at job_future sizes {sizes}")
        report["dispatch_cost"] = dispatch_cost(database, sizes, args.batch, args.dispatch_reps)
        report["sizes_end"] = database.table_sizes(TABLES)
        costs = [d["dispatch_ms"]["median"] for d in report["dispatch_cost"]]
        report["dispatch_cost_ratio_largest_to_smallest"] = round(costs[-1] / costs[0], 2) if costs and costs[0] else None
    # Refuse figures whose setup did not hold (they would measure something else).
    problems = []
    if report["steady"]["unsaturated_jobs_at_end"]:
        problems.append(f"{report['steady']['unsaturated_jobs_at_end']} jobs unsaturated at the end")
    if not report["steady_setup"]["held"]:
        problems.append(f"steady window: {report['steady_setup']['why']}")
    for d in report["dispatch_cost"]:
        if not d["setup_held"]:
            problems.append(f"dispatch cost at {d['job_future_rows']} futures: moved {d['moved']}, not {d['batch']} each")
    report["problems"] = problems
    report["ok"] = not problems
    emit(args, report, summary(report))
    return 0 if report["ok"] else 1


def main_burst(args: argparse.Namespace, argv: list[str] | None) -> int:
    with Database(args, "scale") as database, workdir("scale") as logdir:
        report = base_report("scale", args, database, argv)
        report["burst"] = burst.burst(database, args, logdir, args.burst)
    report["ok"] = report["burst"]["setup_held"]
    emit(args, report, burst.summary(report))
    return 0 if report["ok"] else 1


def summary(r: dict[str, Any]) -> list[str]:
    s, st = r["saturation"], r["steady"]
    lines = [f"scale: {r['schedules']} schedules, horizon {r['horizon']}, {'durable' if r['durable'] else 'NOT durable'}",
             f"  cronbox.schedule(): {r['insert']['schedule_fn']['per_s']} /s; bulk insert: "
             f"{r['insert'].get('bulk', {}).get('per_s')} /s",
             *[f"  saturation from empty, {x['pollers']} poller(s): {x['seconds']} s, {x['futures_written']} futures, "
               f"{x['futures_per_s']} futures/s, pollers {x['poller_cpu_ms_per_future']} ms CPU/future, "
               f"CPU s/s: {x.get('cpu_split')}" for x in r["saturation_runs"]],
             *([f"  pollers ratio (futures/s vs one): {r['pollers_ratio']}"] if r.get("pollers_ratio") else []),
             f"  steady: {st['fires_per_s']} fires/s dispatched, poller {st['poller_cpu_ms_per_fire']} ms CPU/fire, "
             f"fire->dispatch p50 {st['fire_to_dispatch_ms']['p50']} ms p99 {st['fire_to_dispatch_ms']['p99']} ms, "
             f"unsaturated jobs at end {st['unsaturated_jobs_at_end']}",
             f"  steady: {st['fires_decided_per_s']} fires/s decided (dispatched or skipped for overlap), "
             f"fire->decision p50 {st['fire_to_decision_ms']['p50']} ms p99 {st['fire_to_decision_ms']['p99']} ms",
             f"  steady, as decided (run id's time; early = 0): p50 {st['fire_to_decided_real_ms']['p50']} ms "
             f"p99 {st['fire_to_decided_real_ms']['p99']} ms, {st['decided_before_their_time']} decided before "
             f"their time; fire->started ({st['pull_workers']} pull workers, n {st['fire_to_started_ms']['n']}) "
             f"p50 {st['fire_to_started_ms']['p50']} ms p99 {st['fire_to_started_ms']['p99']} ms"]
    for w in r.get("steady_waits", {}).get("avg_backends", [])[:6]:
        lines.append(f"  steady, busy backends: {w['avg']:6.2f} {w['wait']:<24} {w['statement']}")
    for st_ in r.get("steady_statements", [])[:12]:
        if "error" not in st_:
            lines.append(f"  steady, statement: {st_['total_ms'] / 1000:7.1f} s {st_['calls']:>7} calls  {st_['query'][:90]}")
    for d in r["dispatch_cost"]:
        lines.append(f"  dispatch({d['batch']}) at {d['job_future_rows']} futures: median {d['dispatch_ms']['median']} ms "
                     f"({d['per_run_us']} us/run); buffers: "
                     f"{[pl.get('top_buffers') for pl in d['plans']]}")
    lines.append(f"  setup held: {r['ok']}" + ("" if r["ok"] else " -- NOT VALID: " + "; ".join(r["problems"])))
    lines.append(f"  sizes at end: { {k: round((v['table_bytes'] + v['index_bytes']) / 2**20, 1) for k, v in r['sizes_end'].items()} } MB")
    return lines


if __name__ == "__main__":
    sys.exit(main())
