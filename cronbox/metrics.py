"""Prometheus metrics and the health check every process shares (poller, relay, worker).

What lives here is what two or more processes need:
- the loop heartbeat (`tick`) and /healthz with its registered checks;
- database connection errors and reconnects;
- database-wide gauges, refreshed every REFRESH seconds by `serve()` from
  cronbox.metrics_gauges() (outbox depth and oldest age, paused schedules, active runs) and
  the pool's statistics. Every process exports the same database-wide values: aggregate
  them with max(), not sum().
Each process owns its own numbers: poller/metrics.py (fires materialised, runs lost, the
dispatched/skipped/missed counters and dispatch lag from cronbox.metrics_runs(), passed to
`serve()` as its `refresh` hook), relay/metrics.py (messages by outcome, delivery latency,
send duration), cronbox/worker (handler durations).

`serve()` answers GET /metrics and GET /healthz on CRONBOX_METRICS_PORT (0 = off). /healthz
is 200 when the loop ticked within CRONBOX_HEALTH_STALE and `SELECT 1` succeeds, else 503.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, Gauge, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from cronbox import db
from cronbox.log import event

log = logging.getLogger("cronbox.metrics")

REFRESH = 5.0  # seconds between database-wide refreshes (at most; 5 poll intervals if shorter)
LAG_BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

# --- in-process ---------------------------------------------------------------------------
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


def observe_db_error() -> None:
    DB_ERRORS.inc()


def observe_reconnect() -> None:
    RECONNECTS.inc()


# --- database-wide --------------------------------------------------------------------------
class DatabaseCollector(Collector):
    """Gauges from cronbox.metrics_gauges() and the pool's statistics."""

    def __init__(self) -> None:
        self.gauges: list[tuple[str, str | None, float]] = []
        self.pool_stats: dict[str, int] = {}

    def collect(self) -> Iterator[Any]:
        families: dict[str, GaugeMetricFamily] = {
            "outbox_depth": GaugeMetricFamily("cronbox_outbox_depth", "Messages in the outbox", labels=["queue"]),
            "outbox_oldest_age_seconds": GaugeMetricFamily(
                "cronbox_outbox_oldest_age_seconds", "Age of the oldest outbox message", labels=["queue"]),
            "schedules_paused": GaugeMetricFamily("cronbox_schedules_paused", "Paused schedules"),
            "runs_active": GaugeMetricFamily("cronbox_runs_active", "Unfinished runs by state", labels=["state"]),
            "pool_capacity": GaugeMetricFamily("cronbox_resource_pool_capacity", "Capacity of a resource pool (units)",
                                               labels=["pool"]),
            "pool_in_use": GaugeMetricFamily("cronbox_resource_pool_in_use",
                                             "Units of a resource pool held by runs in flight", labels=["pool"]),
            "pool_waiting": GaugeMetricFamily("cronbox_resource_pool_waiting", "Fires waiting for a resource pool's units",
                                              labels=["pool"]),
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

Refresh = Callable[[Any], Awaitable[None]]  # a process's own database-wide numbers, given the pool


async def _refresh(pool: Any, extra: Refresh | None = None) -> None:
    """One refresh of the database-wide numbers, then the process's own (`extra`)."""
    DATABASE.pool_stats = pool.get_stats()
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT metric, label, value FROM cronbox.metrics_gauges()")
        DATABASE.gauges = list(await cur.fetchall())
    if extra is not None:
        await extra(pool)


# --- HTTP ------------------------------------------------------------------------------------
async def _healthy(pool: Any, process: str, stale_after: float) -> tuple[bool, str]:
    read_only = db.read_only()
    if read_only:
        return False, read_only
    last = _last_tick.get(process)
    if last is None:
        return False, "loop has not ticked yet"
    age = time.monotonic() - last
    if age > stale_after:
        return False, f"loop last ticked {age:.1f}s ago (bound {stale_after:g}s)"
    try:
        async with asyncio.timeout(min(5.0, stale_after)):
            async with pool.connection() as conn:
                cur = await conn.execute("SELECT pg_catalog.current_setting('transaction_read_only')")
                row = await cur.fetchone()
        if row and row[0] == "on":
            return False, f"{db.READ_ONLY} (tried {db.targets(getattr(pool, 'conninfo', None))})"
    except Exception as exc:  # any failure to reach the database is unhealthy
        where = db.targets(getattr(pool, "conninfo", None))
        why = "no connection within the bound" if isinstance(exc, TimeoutError) else db.explain(exc)
        return False, f"database unreachable ({where}): {why}"
    failing = [f"{name}: {detail}" for name, ok, detail in extra_health() if not ok]
    if failing:
        return False, "; ".join(failing)
    return True, f"ok: loop ticked {age:.1f}s ago, database reachable"


async def serve(cfg: Any, pool: Any, process: str, stop: asyncio.Event, refresh: Refresh | None = None) -> None:
    """Serve /metrics and /healthz until `stop` is set; refresh database-wide numbers meanwhile
    (and the process's own, `refresh`). Returns at once when CRONBOX_METRICS_PORT is 0."""
    extra = refresh
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
                await _refresh(pool, extra)
            except Exception as exc:  # metrics must never stop the process
                event(log, "metrics refresh failed", level=logging.WARNING, error=repr(exc)[:200])
            try:
                await asyncio.wait_for(stop.wait(), every)
            except TimeoutError:
                pass
    finally:
        await runner.cleanup()
