"""bench/isolation: does a hung sink on one queue slow another queue down?

B schedules on queue `b` and A schedules on queue `a` fire every second (6-field cron), the real
poller and relay deliver them with default settings: `b` to the bench worker (which records
each arrival), `a` to a sink in this process. Two windows in the same run: first `a`'s sink
answers at once (healthy), then it accepts connections and never answers (hung). Reports b's
fire -> arrival p50/p99/max in each window and the ratio hung/healthy (target: p99 within 2x),
fires not arrived, and what happened to `a` (requests left hanging, messages waiting).

  python -m bench.isolation               # 200 + 50 schedules, 20 s per window, durable
  python -m bench.isolation --quick       # 20 + 5 schedules, 4 s per window
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
import time
from typing import Any

from aiohttp import web

from bench.common import Database, Fleet, base_report, emit, extra_env, log, parse_args, pct, wait_until, workdir
from bench.latency import epoch, read_records
from bench.pipeline import wait_worker
from cronbox.pgcluster import free_port


class HangingSink:
    """The `a` worker: answers 202 at once until `hang()`, then never answers (a hung service)."""

    def __init__(self) -> None:
        self.hung = threading.Event()
        self.answered = self.pending = 0
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.port = free_port()
        self.runner: web.AppRunner | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        if not self.hung.is_set():
            self.answered += 1
            return web.Response(status=202)
        self.pending += 1
        try:
            await asyncio.Event().wait()  # never answers; cancelled when the client gives up
            raise AssertionError("unreachable")
        finally:
            self.pending -= 1

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_post("/run", self.handle)
        self.runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1, handler_cancellation=True)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port).start()

    def __enter__(self) -> HangingSink:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.runner is not None:
            asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def create_schedules(database: Database, queue: str, n: int) -> None:
    with database.connect() as conn:
        conn.execute(
            "SELECT count(cronbox.schedule('iso-' || %s || '-' || i, cron => '* * * * * *', queue => %s, "
            "overlap => 'allow')) FROM generate_series(1, %s) AS i", (queue, queue, n))


def saturated(database: Database, ahead: float) -> bool:
    return not database.scalar(
        "SELECT EXISTS (SELECT 1 FROM cronbox.job_fire WHERE next_fire IS NOT NULL AND NOT paused "
        "AND next_fire <= now() + make_interval(secs => %s))", (ahead,))


def window_stats(records: list[tuple], n: int, w0: int, w1: int) -> dict[str, Any]:
    first: dict[int, float] = {}
    fire_of: dict[int, float] = {}
    for arr, run, job, fire, _att in records:
        if fire is None or not str(job).startswith("iso-b-") or not w0 <= epoch(fire) < w1:
            continue
        first[run] = min(arr, first.get(run, arr))
        fire_of[run] = epoch(fire)
    lat = [1000 * (first[r] - fire_of[r]) for r in first]
    return {"window": [w0, w1], "expected": n * (w1 - w0), "arrived": len(first),
            "not_arrived": n * (w1 - w0) - len(first),
            "latency_ms": {q: (round(v, 2) if v is not None else None)
                           for q, v in (("p50", pct(lat, 50)), ("p90", pct(lat, 90)), ("p99", pct(lat, 99)),
                                        ("max", max(lat) if lat else None))}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="queue b's latency with queue a's sink healthy vs hung")
    p.add_argument("--b-schedules", type=int, help="schedules on the healthy queue b (default 200; quick 20)")
    p.add_argument("--a-schedules", type=int, help="schedules on queue a, whose sink hangs (default 50; quick 5)")
    p.add_argument("--seconds", type=int, help="each window (default 20; quick 4)")
    p.add_argument("--http-batch", type=int, default=100, help="messages per HTTP request on both routes")
    args = parse_args(p, argv)
    nb = args.b_schedules or (20 if args.quick else 200)
    na = args.a_schedules or (5 if args.quick else 50)
    seconds = args.seconds or (4 if args.quick else 20)

    with Database(args, "isolation") as database, workdir("isolation") as logdir, HangingSink() as sink:
        report = base_report("isolation", args, database, argv)
        report.update({"b_schedules": nb, "a_schedules": na, "window_s": seconds})
        create_schedules(database, "b", nb)
        create_schedules(database, "a", na)
        port = free_port()
        env = {"CRONBOX_SINKS": f"a=http://127.0.0.1:{sink.port}/run batch={args.http_batch}; "
                                f"*=http://127.0.0.1:{port}/run batch={args.http_batch}", **extra_env(args)}
        records_path = logdir / "arrivals.jsonl"
        with Fleet(logdir) as fleet:
            fleet.worker(database.dsn, port, "respond", "--record", str(records_path))
            wait_worker(port, fleet)
            fleet.cronbox("poller", database.dsn, env)
            fleet.cronbox("relay", database.dsn, env)
            wait_until(lambda: fleet.check_alive() or saturated(database, 60), 300, "saturation")
            healthy = (int(time.time()) + 2, 0)
            healthy = (healthy[0], healthy[0] + seconds)
            hung = (healthy[1] + 1, healthy[1] + 1 + seconds)
            log(f"healthy window {healthy}, hung window {hung}")
            while time.time() < healthy[1]:
                fleet.check_alive()
                time.sleep(0.2)
            sink.hung.set()  # from here on, a's sink accepts and never answers
            while time.time() < hung[1]:
                fleet.check_alive()
                time.sleep(0.2)
            report["a"] = {"pending_requests_at_end": sink.pending, "answered_while_healthy": sink.answered,
                           "waiting_in_outbox": database.scalar("SELECT count(*) FROM cronbox.outbox WHERE queue = 'a'")}
            try:
                wait_until(lambda: database.scalar(
                    "SELECT count(*) FROM cronbox.runs WHERE fire_at >= to_timestamp(%s) AND fire_at < to_timestamp(%s) "
                    "AND job LIKE 'iso-b-%%' AND state <> 'dispatched'", (healthy[0], hung[1]))
                    >= nb * (2 * seconds + 1), 30, "b's windows delivered", interval=0.5)
            except TimeoutError as exc:
                report["wait_error"] = str(exc)
            fleet.stop("relay", "poller", "worker")
        records = read_records(records_path)
        report["b_healthy"] = window_stats(records, nb, *healthy)
        report["b_hung"] = window_stats(records, nb, *hung)
        h, g = report["b_healthy"]["latency_ms"], report["b_hung"]["latency_ms"]
        report["p99_ratio_hung_to_healthy"] = round(g["p99"] / h["p99"], 2) if h["p99"] and g["p99"] else None
        report["p50_ratio_hung_to_healthy"] = round(g["p50"] / h["p50"], 2) if h["p50"] and g["p50"] else None
    report["ok"] = (report["b_healthy"]["not_arrived"] == 0 and report["b_hung"]["not_arrived"] == 0
                    and report["p99_ratio_hung_to_healthy"] is not None)
    emit(args, report, [
        f"isolation: b {nb} schedules/s beside a {na}/s, {seconds} s per window, "
        f"{'durable' if report['durable'] else 'NOT durable'}",
        f"  b with a healthy: p50 {h['p50']} ms, p99 {h['p99']} ms, max {h['max']} ms, not arrived {report['b_healthy']['not_arrived']}",
        f"  b with a hung:    p50 {g['p50']} ms, p99 {g['p99']} ms, max {g['max']} ms, not arrived {report['b_hung']['not_arrived']}",
        f"  p99 hung/healthy: {report['p99_ratio_hung_to_healthy']} (target <= 2); a: {report['a']}",
    ])
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
