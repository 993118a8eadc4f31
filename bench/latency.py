"""bench/latency: S schedules firing every second (6-field cron `* * * * * *`), delivered by
the real poller and relay to the bench worker, which records each message's arrival time.

Reports, over a window of whole seconds after saturation: fire time -> arrival p50, p90, p99,
max; fires expected (S x seconds) vs arrived, per (job, fire_at): none missed, none doubled;
and, when cronbox.trigger() exists, the latency from trigger()'s commit to arrival.

  python -m bench.latency                 # 1,000 schedules, 60 s window, durable
  python -m bench.latency --quick         # 50 schedules, 5 s window (the test suite)
  python -m bench.latency --jittered 50   # and 50 every-second schedules with 800 ms of jitter:
                                          # dispatched_at - due_at of their runs beside the others'
  python -m bench.latency --overlap skip --every-seconds 5 --env CRONBOX_DISPATCH_LEAD=2s
                                          # 'skip' schedules every 5 s, their fires decided early

With --jittered N, two control groups of N every-second schedules run beside the jittered
ones (default overlap 'skip'): N without jitter, overlap 'skip' (`ctl-`), and N with the same
jitter, overlap 'allow' (`jal-`). The S schedules are overlap 'allow', which early dispatch
takes ahead of their time; 'skip' is dispatched at the due time itself. So jitter's own cost is
the jittered group against `ctl-`, in the same run; `jal-` shows jitter with early dispatch.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from bench.common import (
    Database, Fleet, base_report, cpu_delta, emit, extra_env, log, parse_args, pct, postgres_cpu,
    wait_until, workdir,
)
from bench.database import WaitSampler
from bench.pipeline import wait_worker, worker_stats
from cronbox.pgcluster import free_port


def create_schedules(database: Database, s: int, overlap: str = "allow", every: int = 1) -> float:
    t0 = time.monotonic()
    cron = "* * * * * *" if every == 1 else f"*/{every} * * * * *"
    with database.connect() as conn:
        conn.execute(
            "SELECT count(cronbox.schedule('lat-' || i, cron => %s, overlap => %s)) "
            "FROM generate_series(1, %s) AS i", (cron, overlap, s))
    return time.monotonic() - t0


def saturated(database: Database, ahead: float) -> bool:
    return not database.scalar(
        "SELECT EXISTS (SELECT 1 FROM cronbox.job_fire WHERE next_fire IS NOT NULL AND NOT paused "
        "AND next_fire <= now() + make_interval(secs => %s))", (ahead,))


def read_records(path: Path) -> list[tuple[float, int, str, str, int]]:
    if not path.exists():
        return []
    return [tuple(orjson.loads(line)) for line in path.read_bytes().splitlines() if line]


def epoch(ts: str) -> float:
    return datetime.fromisoformat(ts).timestamp()


def measure_trigger(database: Database, count: int) -> dict[str, Any]:
    """trigger() -> arrival, one call at a time; arrivals are matched to calls in order."""
    if not database.has_function("trigger"):
        return {"available": False, "reason": "cronbox.trigger does not exist in the installed schema"}
    with database.connect() as conn:
        conn.execute("SELECT cronbox.schedule('lat-trigger', cron => '0 0 0 1 1 *', overlap => 'allow')")
    calls: list[float] = []
    try:
        for _ in range(count):
            with database.connect() as conn:
                conn.execute("SELECT cronbox.trigger('lat-trigger')")
            calls.append(time.time())
            time.sleep(0.3)
    except Exception as exc:  # report, never hide: the function exists but failed
        return {"available": True, "error": str(exc).strip()[:500]}
    return {"available": True, "calls": calls}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="cronbox fire -> arrival latency")
    p.add_argument("--schedules", type=int, help="schedules firing every second (default 1,000; quick 50)")
    p.add_argument("--seconds", type=int, help="measured window (default 60; quick 5)")
    p.add_argument("--mode", choices=("report-sql", "respond", "accept"), default="respond",
                   help="how the worker completes runs (see bench/worker.py; default respond: the "
                        "relay finishes runs from the answer)")
    p.add_argument("--http-batch", default="auto",
                   help="the route's batch option: auto (the product default: the worker declares, with "
                        "--accept-batch, what it takes) or N messages per request (1 = one POST per message)")
    p.add_argument("--accept-batch", type=int, default=1000,
                   help="the batch size the bench worker declares (Cronbox-Accept-Batch; 0: none), as the "
                        "worker kit declares its own")
    p.add_argument("--triggers", type=int, default=20, help="trigger() calls to time (quick: 5)")
    p.add_argument("--overlap", choices=("allow", "skip"), default="allow",
                   help="the S schedules' overlap policy ('skip': early dispatch takes their fires only "
                        "with a lead over 1 s, claimable from their due time)")
    p.add_argument("--every-seconds", type=int, default=1, choices=(1, 2, 3, 5, 10, 15, 20, 30),
                   help="the S schedules fire every this many seconds (cron */N seconds): a 'skip' job's "
                        "run then ends before its next fire enters the lead")
    p.add_argument("--jittered", type=int, default=0,
                   help="also this many every-second schedules with jitter => '800 milliseconds' (overlap "
                        "'skip', dispatched at their due time): their dispatch lag after the jittered due time")
    args = parse_args(p, argv)
    s = args.schedules or (50 if args.quick else 1000)
    seconds = args.seconds or (5 if args.quick else 60)
    triggers = 5 if args.quick and args.triggers == 20 else args.triggers

    with Database(args, "latency") as database, workdir("latency") as logdir:
        report = base_report("latency", args, database, argv)
        report.update({"schedules": s, "window_s": seconds, "mode": args.mode, "overlap": args.overlap,
                       "every_seconds": args.every_seconds})
        report["schedule_s"] = round(create_schedules(database, s, args.overlap, args.every_seconds), 3)
        if args.jittered:
            with database.connect() as conn:
                conn.execute("SELECT count(cronbox.schedule('jit-' || i, every => '1 second', "
                             "jitter => '800 milliseconds')) FROM generate_series(1, %s) AS i", (args.jittered,))
                conn.execute("SELECT count(cronbox.schedule('ctl-' || i, every => '1 second')) "
                             "FROM generate_series(1, %s) AS i", (args.jittered,))
                conn.execute("SELECT count(cronbox.schedule('jal-' || i, every => '1 second', overlap => 'allow', "
                             "jitter => '800 milliseconds')) FROM generate_series(1, %s) AS i", (args.jittered,))
        port = free_port()
        route = f"*=http://127.0.0.1:{port}/run" + ("" if args.http_batch == "auto" else f" batch={args.http_batch}")
        env = {"CRONBOX_SINKS": route, **extra_env(args)}
        report["route"] = route
        records_path = logdir / "arrivals.jsonl"
        with Fleet(logdir) as fleet:
            fleet.worker(database.dsn, port, args.mode, "--record", str(records_path),
                         "--accept-batch", str(args.accept_batch))
            wait_worker(port, fleet)
            t_start = time.monotonic()
            fleet.cronbox("poller", database.dsn, env)
            fleet.cronbox("relay", database.dsn, env)
            wait_until(lambda: fleet.check_alive() or saturated(database, 60), 300, "saturation")
            report["saturation_s"] = round(time.monotonic() - t_start, 2)
            w0 = int(time.time()) + 2
            w1 = w0 + seconds
            log(f"saturated in {report['saturation_s']} s; measuring fires in [{w0}, {w1})")
            cpu0, pg0 = fleet.cpu(), postgres_cpu(database.postmaster)
            with WaitSampler(database) as waits:
                while time.time() < w1:
                    fleet.check_alive()
                    time.sleep(0.2)
            report["server_waits"] = waits.top()
            report["trigger"] = measure_trigger(database, triggers)
            # every fire of the window is delivered (or, if something is wrong, the wait ends)
            try:
                wait_until(lambda: database.scalar(
                    "SELECT count(*) FROM cronbox.runs WHERE fire_at >= to_timestamp(%s) AND fire_at < to_timestamp(%s) "
                    "AND state NOT IN ('dispatched')", (w0, w1)) >= s * fire_seconds(w0, w1, args.every_seconds), max(30, seconds), "window delivered",
                    interval=1.0)
            except TimeoutError as exc:
                report["wait_error"] = str(exc)
            cpu1, pg1 = fleet.cpu(), postgres_cpu(database.postmaster)
            report["cpu_s_per_s"] = {k: round(v / seconds, 3) for k, v in cpu_delta(cpu0, cpu1).items()}
            if pg0 is not None and pg1 is not None:
                report["cpu_s_per_s"]["postgres"] = round((pg1 - pg0) / seconds, 3)
            report["worker"] = worker_stats(port)
            report["rss_mb"] = fleet.rss()
            fleet.stop("relay", "poller", "worker")
        records = read_records(records_path)
        with database.connect() as conn:
            db_states = dict(conn.execute(
                "SELECT state, count(*) FROM cronbox.runs WHERE fire_at >= to_timestamp(%s) AND fire_at < to_timestamp(%s) "
                "AND job LIKE 'lat-%%' AND job <> 'lat-trigger' GROUP BY state", (w0, w1)).fetchall())
            stages = conn.execute(
                "SELECT extract(epoch FROM dispatched_at - fire_at) * 1000, "
                "extract(epoch FROM delivered_at - dispatched_at) * 1000 "
                "FROM cronbox.runs WHERE fire_at >= to_timestamp(%s) AND fire_at < to_timestamp(%s) "
                "AND dispatched_at IS NOT NULL AND job LIKE 'lat-%%'", (w0, w1)).fetchall()
            groups = {prefix: [float(r[0]) for r in conn.execute(
                "SELECT extract(epoch FROM dispatched_at - due_at) * 1000 FROM cronbox.runs "
                "WHERE fire_at >= to_timestamp(%s) AND fire_at < to_timestamp(%s) AND dispatched_at IS NOT NULL "
                "AND job LIKE %s", (w0, w1, prefix + "-%")).fetchall()] for prefix in ("jit", "ctl", "jal")}
            jittered = groups["jit"]
            db_doubles = conn.execute(
                "SELECT count(*) FROM (SELECT 1 FROM cronbox.runs WHERE fire_at >= to_timestamp(%s) "
                "AND fire_at < to_timestamp(%s) GROUP BY job_id, fire_at HAVING count(*) > 1) d", (w0, w1)).fetchone()[0]
        report.update(analyse(records, s, w0, w1, report.get("trigger", {}), args.every_seconds))
        report["db_states_in_window"] = db_states
        # where the time goes, from the run rows (delivered_at is the relay's ack, after the answer)
        report["db_stage_ms"] = {
            name: {q: round(pct(vals, q), 2) if vals else None for q in (50, 99)}
            for name, vals in (("fire_to_dispatch", [float(a) for a, _ in stages]),
                               ("dispatch_to_ack", [float(b) for _, b in stages if b is not None]))}
        report["db_doubled_fires"] = db_doubles
        if args.jittered:  # due_at = fire_at + the fire's jitter: the lag after the jittered due time
            report["jittered_due_to_dispatch_ms"] = {
                "runs": len(jittered), **{q: round(pct(jittered, q), 2) if jittered else None for q in (50, 99)},
                "max": round(max(jittered), 2) if jittered else None}
            # the same in the same run for the control groups (module docstring)
            report["due_to_dispatch_ms_by_group"] = {
                name: {"runs": len(v), **{q: round(pct(v, q), 2) if v else None for q in (50, 99)},
                       "max": round(max(v), 2) if v else None}
                for name, v in (("jittered, overlap skip", groups["jit"]), ("no jitter, overlap skip", groups["ctl"]),
                                ("jittered, overlap allow", groups["jal"]))}
        # fires with no run row at all were lost (or recorded missed/skipped by a policy)
        ran = sum(v for k, v in db_states.items() if k not in ("missed", "skipped"))
        report["missed"] = report["expected"] - ran
        logdir.keep = args.keep or report["not_arrived"] > 0 or report["early"] > 0 or report["doubled"] > 0 or report["redelivered"] > 0
    report["ok"] = (report["missed"] == 0 and report["early"] == 0 and report["not_arrived"] == 0 and report["doubled"] == 0 and report["redelivered"] == 0
                    and report["db_doubled_fires"] == 0)
    emit(args, report, summary(report))
    return 0 if report["ok"] else 1


def fire_seconds(w0: int, w1: int, every: int) -> int:
    """The seconds of [w0, w1) on which a schedule firing every `every` seconds (cron */every) fires."""
    return sum(1 for t in range(w0, w1) if t % 60 % every == 0)


def analyse(records: list[tuple], s: int, w0: int, w1: int, trig: dict[str, Any], every: int = 1) -> dict[str, Any]:
    window = [(arr, run, job, fire) for arr, run, job, fire, _att in records
              if job.startswith("lat-") and job != "lat-trigger" and fire is not None and w0 <= epoch(fire) < w1]
    runs_per_fire: dict[tuple[str, str], set[int]] = {}
    first_arrival: dict[int, float] = {}
    for arr, run, job, fire in window:
        runs_per_fire.setdefault((job, fire), set()).add(run)
        first_arrival[run] = min(arr, first_arrival.get(run, arr))
    expected = s * fire_seconds(w0, w1, every)
    # latency of the first delivery of each run; a redelivery is at-least-once at work
    fire_of = {run: fire for _, run, _, fire in window}
    lat_ms = [1000 * (arr - epoch(fire_of[run])) for run, arr in first_arrival.items()]
    out: dict[str, Any] = {
        "expected": expected, "arrived": len(window), "distinct_fires_arrived": len(runs_per_fire),
        "not_arrived": expected - len(runs_per_fire),  # by the end of the wait: late or lost
        "doubled": sum(len(v) - 1 for v in runs_per_fire.values()),  # two runs for one fire
        "redelivered": len(window) - len(first_arrival),              # one run's message twice
        "latency_ms": {q: (round(v, 2) if v is not None else None)
                       for q, v in (("min", min(lat_ms) if lat_ms else None), ("p50", pct(lat_ms, 50)),
                                    ("p90", pct(lat_ms, 90)), ("p99", pct(lat_ms, 99)),
                                    ("max", max(lat_ms) if lat_ms else None))},
        # a message that reached the worker before its fire time (the same clock here): a bug
        "early": sum(1 for v in lat_ms if v < 0),
    }
    # Where the tail is: per fire second, how many fires arrived more than 50 ms late (clustered
    # in a few seconds = a stall, e.g. a saturation pass; spread out = per-fire cost).
    slow: dict[int, list[float]] = {}
    for run, arr in first_arrival.items():
        ms = 1000 * (arr - epoch(fire_of[run]))
        if ms > 50:
            slow.setdefault(int(epoch(fire_of[run])) - w0, []).append(ms)
    out["over_50ms"] = {
        "fires": sum(len(v) for v in slow.values()), "seconds_with_any": len(slow),
        "worst_seconds": [{"second": k, "fires": len(v), "max_ms": round(max(v), 1)}
                          for k, v in sorted(slow.items(), key=lambda kv: -len(kv[1]))[:8]],
    }
    # Per fire second, the requests its fires came in (one arrival time each at the worker):
    # how many, and when the first and the last arrived (median over the seconds): a p50 set by
    # the first request is the relay's wake-up and send; one set by later requests is queueing.
    per_second: dict[int, set[float]] = {}
    for run, arr in first_arrival.items():
        per_second.setdefault(int(epoch(fire_of[run])), set()).add(arr)
    if per_second:
        out["requests_per_fire_second"] = {
            "requests_p50": pct([len(v) for v in per_second.values()], 50),
            "first_ms_p50": round(pct([1000 * (min(v) - sec) for sec, v in per_second.items()], 50) or 0, 2),
            "last_ms_p50": round(pct([1000 * (max(v) - sec) for sec, v in per_second.items()], 50) or 0, 2),
        }
    if trig.get("calls"):
        arrivals = sorted(arr for arr, _run, job, _f, _a in records if job == "lat-trigger")
        calls = trig.pop("calls")
        lat = [1000 * (a - c) for c, a in zip(calls, arrivals, strict=False)]
        trig.update({"calls": len(calls), "arrived": len(arrivals),
                     "latency_ms": {"p50": round(pct(lat, 50) or 0, 2), "max": round(max(lat), 2) if lat else None}})
    return out


def summary(r: dict[str, Any]) -> list[str]:
    lat = r["latency_ms"]
    trig = r.get("trigger", {})
    return [f"  route {r.get('route')}; requests per fire second {r.get('requests_per_fire_second')}"] + [
        f"latency: {r['schedules']} schedules every second, {r['window_s']} s window, "
        f"{'durable' if r['durable'] else 'NOT durable'}, worker {r['mode']}",
        f"  fire -> arrival ms: min {lat.get('min')} (arrived before the fire: {r.get('early')}), p50 {lat['p50']}, p90 {lat['p90']}, p99 {lat['p99']}, max {lat['max']}",
        f"  fires over 50 ms: {r.get('over_50ms', {}).get('fires')} in {r.get('over_50ms', {}).get('seconds_with_any')} "
        f"fire seconds; worst: {r.get('over_50ms', {}).get('worst_seconds', [])[:3]}",
        f"  fires expected {r['expected']}, arrived {r['arrived']} ({r['distinct_fires_arrived']} distinct fires): "
        f"not arrived by the end {r['not_arrived']} (no run at all: {r['missed']}), doubled {r['doubled']}, "
        f"redelivered {r['redelivered']}; run states in window {r['db_states_in_window']}",
        "  trigger() -> arrival: " + (str(trig.get("latency_ms")) if trig.get("available") and "latency_ms" in trig
                                       else trig.get("reason") or trig.get("error") or "n/a"),
        f"  from the run rows (p50/p99 ms): {r.get('db_stage_ms')}",
    ] + ([f"  jittered runs, due (fire + jitter) -> dispatch ms: {r['jittered_due_to_dispatch_ms']}",
          f"  due -> dispatch ms by group: {r['due_to_dispatch_ms_by_group']}"]
         if "jittered_due_to_dispatch_ms" in r else []) + [
        f"  CPU s per s: {r.get('cpu_s_per_s')}",
    ]


if __name__ == "__main__":
    sys.exit(main())
