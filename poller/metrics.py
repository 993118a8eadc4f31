"""The poller's own metrics (the shared ones, /healthz and the gauges, are cronbox.metrics).

- in-process counters: fires materialised, runs the reaper declared lost;
- database-wide run counters, refreshed by `refresh` (the hook cronbox.metrics.serve calls
  every few seconds): runs dispatched per queue, fires skipped (overlap) and missed (catch-up),
  and the dispatch lag histogram, from cronbox.metrics_runs() over the runs drawn since the
  last refresh. Every poller exports the same database-wide values: aggregate with max().
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from prometheus_client import REGISTRY, Counter
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from cronbox.metrics import LAG_BOUNDS
from poller import store

SETTLE = 2.0   # metrics_runs only counts runs older than this (their transaction has committed)

FIRES_MATERIALISED = Counter("cronbox_fires_materialised_total", "Fires the poller materialised as future runs")
RUNS_LOST = Counter("cronbox_runs_lost_total", "Runs the reaper declared lost (lease expired)")


def observe_saturation(futures: int) -> None:
    if futures:
        FIRES_MATERIALISED.inc(futures)


def observe_reaped(lost: int) -> None:
    if lost:
        RUNS_LOST.inc(lost)


class RunCounters(Collector):
    """Cumulative run counters from cronbox.metrics_runs(), since this process started."""

    def __init__(self) -> None:
        self.runs: dict[tuple[str, str], int] = defaultdict(int)        # (queue, outcome) -> n
        self.lag_buckets: dict[str, list[int]] = {}                     # queue -> per-bucket counts
        self.lag_sum: dict[str, float] = defaultdict(float)
        self.watermark: int | None = None

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


RUNS = RunCounters()
REGISTRY.register(RUNS)


async def refresh(pool: Any) -> None:
    """Count the runs drawn since the last refresh (the first call only sets the watermark:
    counting starts at start-up, not over the whole history)."""
    async with pool.connection() as conn:
        before = await store.run_id_before(conn, SETTLE)
        if RUNS.watermark is None:
            RUNS.watermark = before - 1
            return
        RUNS.add_runs(await store.metrics_runs(conn, RUNS.watermark, before, LAG_BOUNDS))
        RUNS.watermark = before - 1
