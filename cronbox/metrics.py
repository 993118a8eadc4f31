"""Prometheus metrics and the health check of `cronbox poller` and `cronbox relay`.

Two kinds of numbers:
- in-process counters, incremented by the loops through the `observe_*` one-liners
  (fires materialised, messages delivered/retried/dead-lettered, delivery latency, runs lost
  by the reaper, database errors and reconnects); sum them across processes;
- database-wide numbers, refreshed every REFRESH seconds by `serve()` from
  cronbox.metrics_gauges() (outbox depth and oldest age, paused schedules, active runs) and,
  in the poller, cronbox.metrics_runs() (runs dispatched per queue, skipped and missed,
  dispatch lag histogram). Every process exports the same database-wide values: aggregate
  them with max(), not sum().

`serve()` answers GET /metrics and GET /healthz on CRONBOX_METRICS_PORT (0 = off). /healthz
is 200 when the loop ticked within CRONBOX_HEALTH_STALE and `SELECT 1` succeeds, else 503.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from cronbox import db
from cronbox.log import event

log = logging.getLogger("cronbox.metrics")

REFRESH = 5.0  # seconds between database-wide refreshes (at most; 5 poll intervals if shorter)
SETTLE = 2.0   # metrics_runs only counts runs older than this (their transaction has committed)
LAG_BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

# --- in-process ---------------------------------------------------------------------------
FIRES_MATERIALISED = Counter("cronbox_fires_materialised_total",
                             "Fires the poller materialised as future runs")
MESSAGES = Counter("cronbox_messages_total",
                   "Outbox messages handled by the relay, by outcome (delivered, retried, dead_lettered)",
                   ["queue", "sink", "outcome"])
DELIVERY_LATENCY = Histogram("cronbox_delivery_latency_seconds",
                             "Fire time to delivery acknowledged by the sink, per delivered run message",
                             ["sink"], buckets=LAG_BOUNDS)
SEND_DURATION = Histogram("cronbox_send_duration_seconds", "Duration of one sink call (a batch)",
                          ["sink"], buckets=LAG_BOUNDS)
RUNS_LOST = Counter("cronbox_runs_lost_total", "Runs the reaper declared lost (lease expired)")
DB_ERRORS = Counter("cronbox_db_errors_total", "Database operations that failed with a connection error")
RECONNECTS = Counter("cronbox_db_reconnects_total", "Reconnections (LISTEN connection) after a loss")
TICKS = Counter("cronbox_loop_ticks_total", "Iterations of the main loop", ["process"])
LAST_TICK = Gauge("cronbox_loop_last_tick_timestamp_seconds", "Unix time of the last loop iteration",
                  ["process"])

_last_tick: dict[str, float] = {}
# Extra health checks a process registers (a loop that keeps failing, a circuit open on a
# route, ...): name -> callable returning (ok, detail). /healthz fails when any fails.
_checks: dict[str, Callable[[], tuple[bool, str]]] = {}


def register_health_check(name: str, check: Callable[[], tuple[bool, str]]) -> None:
    """Add (or replace) a named check that /healthz evaluates on every request."""
    _checks[name] = check


def unregister_health_check(name: str) -> None:
    _checks.pop(name, None)


def extra_health() -> list[tuple[str, bool, str]]:
    """The registered checks as (name, ok, detail); a check that raises counts as failed."""
    out = []
    for name, check in list(_checks.items()):
        try:
            ok, detail = check()
        except Exception as exc:  # a broken check is itself unhealthy, never a crash
            ok, detail = False, f"check failed: {exc.__class__.__name__}"
        out.append((name, ok, detail))
    return out


def tick(process: str) -> None:
    """The main loop went round once (feeds /healthz)."""
    now = time.time()
    _last_tick[process] = time.monotonic()
    TICKS.labels(process).inc()
    LAST_TICK.labels(process).set(now)


def observe_saturation(futures: int) -> None:
    if futures:
        FIRES_MATERIALISED.inc(futures)


def observe_relay_batch(rows: Sequence[Sequence[Any]], delivered: Collection[int], dead: Collection[int],
                        sink_of: Callable[[str], str | None], seconds: float) -> None:
    """A settled relay batch. rows as claimed: (outbox_id, queue, key, body, age, send_at), age
    being the seconds from fire time to claim by the database clock (None for notifications),
    send_at > 0 for a row held until its due time (claimed ahead: its latency is the send
    time alone); delivered and dead are outbox ids, every other row was retried; seconds =
    send time from the (first) due time."""
    sinks: set[str] = set()
    for row in rows:
        oid, queue = row[0], row[1]
        age = None if row[4] is None else 0.0 if row[5] > 0 else row[4]
        sink = _sink_label(sink_of(queue))
        sinks.add(sink)
        outcome = "delivered" if oid in delivered else "dead_lettered" if oid in dead else "retried"
        MESSAGES.labels(queue, sink, outcome).inc()
        if outcome == "delivered" and age is not None:
            DELIVERY_LATENCY.labels(sink).observe(max(0.0, age + seconds))
    for sink in sinks:
        SEND_DURATION.labels(sink).observe(seconds)


def _sink_label(target: str | None) -> str:
    """The sink kind, never the URL (which may carry credentials and has unbounded values)."""
    if not target:
        return "unrouted"
    return target.split("://", 1)[0] if "://" in target else target


def observe_reaped(lost: int) -> None:
    if lost:
        RUNS_LOST.inc(lost)


def observe_db_error() -> None:
    DB_ERRORS.inc()


def observe_reconnect() -> None:
    RECONNECTS.inc()


# --- database-wide --------------------------------------------------------------------------
class DatabaseCollector(Collector):
    """Gauges from cronbox.metrics_gauges() and cumulative run counters from cronbox.metrics_runs()."""

    def __init__(self) -> None:
        self.gauges: list[tuple[str, str | None, float]] = []
        self.runs: dict[tuple[str, str], int] = defaultdict(int)        # (queue, outcome) -> n
        self.lag_buckets: dict[str, list[int]] = {}                     # queue -> per-bucket counts
        self.lag_sum: dict[str, float] = defaultdict(float)
        self.watermark: int | None = None
        self.pool_stats: dict[str, int] = {}

    def add_runs(self, rows: list[tuple[str, str, int | None, int, float]]) -> None:
        for queue, outcome, bucket, n, lag_sum in rows:
            self.runs[(queue, outcome)] += n
            if outcome == "dispatched" and bucket is not None:
                counts = self.lag_buckets.setdefault(queue, [0] * (len(LAG_BOUNDS) + 1))
                counts[bucket] += n
                self.lag_sum[queue] += lag_sum

    def collect(self) -> Iterator[Any]:
        dispatched = CounterMetricFamily("cronbox_runs_dispatched", "Runs dispatched into the outbox "
                                         "(database-wide, since this process started)", labels=["queue"])
        not_run = CounterMetricFamily("cronbox_runs_not_run", "Fires recorded without running, by reason "
                                      "(skipped: overlap policy; missed: catch-up policy; database-wide)",
                                      labels=["queue", "reason"])
        for (queue, outcome), n in sorted(self.runs.items()):
            if outcome == "dispatched":
                dispatched.add_metric([queue], n)
            else:
                not_run.add_metric([queue, outcome], n)
        yield dispatched
        yield not_run
        lag = HistogramMetricFamily("cronbox_dispatch_lag_seconds", "Due time to dispatch of each run "
                                    "(database-wide)", labels=["queue"])
        for queue, counts in sorted(self.lag_buckets.items()):
            cumulative, buckets = 0, []
            # width_bucket: counts[0] are below the first bound, counts[i] in [bound[i-1], bound[i])
            for i, bound in enumerate(LAG_BOUNDS):
                cumulative += counts[i]
                buckets.append((repr(bound), cumulative))
            buckets.append(("+Inf", cumulative + counts[-1]))
            lag.add_metric([queue], buckets, self.lag_sum[queue])
        yield lag
        families: dict[str, GaugeMetricFamily] = {
            "outbox_depth": GaugeMetricFamily("cronbox_outbox_depth", "Messages in the outbox", labels=["queue"]),
            "outbox_oldest_age_seconds": GaugeMetricFamily(
                "cronbox_outbox_oldest_age_seconds", "Age of the oldest outbox message", labels=["queue"]),
            "schedules_paused": GaugeMetricFamily("cronbox_schedules_paused", "Paused schedules"),
            "runs_active": GaugeMetricFamily("cronbox_runs_active", "Unfinished runs by state", labels=["state"]),
        }
        for metric, label, value in self.gauges:
            fam = families.get(metric)
            if fam is not None:
                fam.add_metric([label] if label is not None else [], value)
        yield from families.values()
        pool = GaugeMetricFamily("cronbox_pool", "Connection pool statistics (psycopg_pool get_stats)",
                                 labels=["stat"])
        for key, value in sorted(self.pool_stats.items()):
            pool.add_metric([key], value)
        yield pool


DATABASE = DatabaseCollector()
REGISTRY.register(DATABASE)


async def refresh(pool: Any, process: str) -> None:
    """One refresh of the database-wide numbers (poller: also the run counters)."""
    DATABASE.pool_stats = pool.get_stats()
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT metric, label, value FROM cronbox.metrics_gauges()")
        DATABASE.gauges = list(await cur.fetchall())
        if process != "poller":
            return
        cur = await conn.execute("SELECT cronbox.run_id_at(now() - make_interval(secs => %s))", (SETTLE,))
        before = (await cur.fetchone())[0]
        if DATABASE.watermark is None:  # count from start-up on, not the whole history
            DATABASE.watermark = before - 1
            return
        cur = await conn.execute("SELECT queue, outcome, bucket, runs, lag_sum FROM cronbox.metrics_runs(%s, %s, %s)",
                                 (DATABASE.watermark, before, list(LAG_BOUNDS)))
        DATABASE.add_runs(list(await cur.fetchall()))
        DATABASE.watermark = before - 1


# --- HTTP ------------------------------------------------------------------------------------
async def _healthy(pool: Any, process: str, stale_after: float) -> tuple[bool, str]:
    last = _last_tick.get(process)
    if last is None:
        return False, "loop has not ticked yet"
    age = time.monotonic() - last
    if age > stale_after:
        return False, f"loop last ticked {age:.1f}s ago (bound {stale_after:g}s)"
    try:
        async with asyncio.timeout(min(5.0, stale_after)):
            async with pool.connection() as conn:
                await conn.execute("SELECT 1")
    except Exception as exc:  # any failure to reach the database is unhealthy
        where = db.targets(getattr(pool, "conninfo", None))
        why = "no connection within the bound" if isinstance(exc, TimeoutError) else db.explain(exc)
        return False, f"database unreachable ({where}): {why}"
    failing = [f"{name}: {detail}" for name, ok, detail in extra_health() if not ok]
    if failing:
        return False, "; ".join(failing)
    return True, f"ok: loop ticked {age:.1f}s ago, database reachable"


async def serve(cfg: Any, pool: Any, process: str, stop: asyncio.Event) -> None:
    """Serve /metrics and /healthz until `stop` is set; refresh database-wide numbers meanwhile.
    Returns at once when CRONBOX_METRICS_PORT is 0."""
    if not cfg.metrics_port:
        return
    from aiohttp import web  # only processes that serve metrics pay for the import
    stale_after = cfg.health_stale.total_seconds()
    every = max(0.5, min(REFRESH, 5 * cfg.poll_interval.total_seconds()))

    async def metrics(_: Any) -> Any:
        return web.Response(body=generate_latest(REGISTRY), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(_: Any) -> Any:
        ok, why = await _healthy(pool, process, stale_after)
        return web.Response(status=200 if ok else 503, text=why + "\n")

    app = web.Application()
    app.add_routes([web.get("/metrics", metrics), web.get("/healthz", healthz)])
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, cfg.metrics_host, cfg.metrics_port)
    await site.start()
    event(log, "serving metrics", process=process, host=cfg.metrics_host, port=cfg.metrics_port)
    try:
        while not stop.is_set():
            try:
                await refresh(pool, process)
            except Exception as exc:  # metrics must never stop the process
                event(log, "metrics refresh failed", level=logging.WARNING, error=repr(exc)[:200])
            try:
                await asyncio.wait_for(stop.wait(), every)
            except TimeoutError:
                pass
    finally:
        await runner.cleanup()
