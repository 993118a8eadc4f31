"""The relay's own metrics (the shared ones, /healthz and the gauges, are cronbox.metrics):
messages by outcome, fire-to-delivery latency and the duration of each sink call."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Collection, Sequence

from prometheus_client import Counter, Histogram

from cronbox.metrics import LAG_BOUNDS
from relay.sinks import Row

MESSAGES = Counter("cronbox_messages_total",
                   "Outbox messages handled by the relay, by outcome (delivered, retried, dead_lettered)",
                   ["queue", "sink", "outcome"])
DELIVERY_LATENCY = Histogram("cronbox_delivery_latency_seconds",
                             "Fire time to delivery acknowledged by the sink, per delivered run message",
                             ["sink"], buckets=LAG_BOUNDS)
SEND_DURATION = Histogram("cronbox_send_duration_seconds", "Duration of one sink call (a batch)",
                          ["sink"], buckets=LAG_BOUNDS)


_NO_QUEUE = object()


def observe_batch(rows: Sequence[Row], delivered: Collection[int], dead: Collection[int],
                  sink_of: Callable[[str], str | None], seconds: float) -> None:
    """A settled batch: `delivered` and `dead` are outbox ids, every other row was retried;
    `seconds` = send time from the (first) due time. A row's latency is its age at claim (fire
    time to claim, database clock) plus the send time; a row held until its due time (claimed
    ahead, send_at > 0) counts the send time alone; notifications (age None) have none.
    Counted per (queue, sink, outcome) and the label children looked up once per batch, not
    per row (per row, the lookups were a fifth of the relay's CPU at 20,000 runs/s)."""
    sink_by_queue: dict[str, str] = {}
    counts: dict[str, list[int]] = {}  # per queue: delivered, dead-lettered, retried
    latencies: dict[str, list[float]] = {}
    last: object = _NO_QUEUE
    for row in rows:  # by position, not by name (a NamedTuple's field is a call): once per row
        queue = row[1]
        if queue != last:  # a batch is one queue's (a lane's): looked up once
            sink = sink_by_queue.get(queue)
            if sink is None:
                sink = sink_by_queue[queue] = _sink_label(sink_of(queue))
            counted = counts.setdefault(queue, [0, 0, 0])
            values = latencies.setdefault(sink, [])
            last = queue
        if row[0] in delivered:
            counted[0] += 1
            age = row[4]
            if age is not None:
                value = (0.0 if row[5] > 0 else age) + seconds
                values.append(value if value > 0.0 else 0.0)  # max(0.0, value), NaN included
        elif row[0] in dead:
            counted[1] += 1
        else:
            counted[2] += 1
    for queue, counted in counts.items():
        sink = sink_by_queue[queue]
        for outcome, n in zip(("delivered", "dead_lettered", "retried"), counted):
            if n:
                MESSAGES.labels(queue, sink, outcome).inc(n)
    for sink, values in latencies.items():
        if values:
            observe_many(DELIVERY_LATENCY.labels(sink), values)
    for sink in set(sink_by_queue.values()):
        SEND_DURATION.labels(sink).observe(seconds)


def observe_many(child: Histogram, values: Sequence[float]) -> None:
    """`child.observe(v)` for each of `values`, with one increment per bucket touched and one of
    the sum: prometheus_client's observe scans the bounds and takes two locks per value (a
    batch's latencies mostly share a bucket). Through the histogram's own value objects (the
    library's private attributes, stable since 0.4); where they are not there, one by one."""
    bounds = getattr(child, "_upper_bounds", None)
    buckets = getattr(child, "_buckets", None)
    total = getattr(child, "_sum", None)
    if bounds is None or buckets is None or total is None or len(bounds) != len(buckets):
        for value in values:
            child.observe(value)
        return
    counts: dict[int, int] = {}
    for value in values:
        i = bisect_left(bounds, value)  # the first bound >= value: observe's bucket
        counts[i] = counts.get(i, 0) + 1
    for i, n in counts.items():
        if i < len(buckets):  # NaN is in no bucket, as observe leaves it
            buckets[i].inc(n)
    total.inc(sum(values))


def _sink_label(target: str | None) -> str:
    """The sink kind, never the URL (which may carry credentials and has unbounded values)."""
    if not target:
        return "unrouted"
    return target.split("://", 1)[0] if "://" in target else target
