"""The relay's checks beside delivery: every queue has a route (at start, then queues that
appear later), and which of cronbox's own queues another live relay's route names (the relay
leaves those to it). None of them ever stops delivery: a failed check is logged and tried again."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import psycopg

from cronbox import db
from cronbox.config import ConfigError
from cronbox.log import event
from cronbox.proc import Waker, ticks
from relay import store
from relay.routes import OWN_ROUTE_QUEUES, Routes

log = logging.getLogger("cronbox.relay")
NAMED_EVERY = 5.0  # seconds between looks at the routes other relays name (the registry's heartbeat)


async def check_routes(pool, routes: Routes, buckets: Sequence[int | None] = (None,)) -> list[int]:
    """Unrouted queues are an error at start, never a silent drop. With a default route every
    queue has one: nothing to read. `buckets`: read bucket by bucket (on Citus, every bucket of
    the job), so that a worker node down does not keep the relay from starting: the buckets
    whose node is unreachable are returned, their queues checked by `watch_unrouted` once they
    are reached (their messages wait in the outbox meanwhile, as every unrouted one does);
    (None,): every bucket in one call."""
    if routes.default is not None:
        return []
    queues: set[str] = set()
    unreached: list[int] = []
    for bucket in buckets:
        try:
            queues.update(await db.retrying(lambda b=bucket: store.known_queues(pool, b), budget=60, what="queues"))
        except psycopg.Error as exc:
            if bucket is None or not db.node_unreachable(exc):
                raise
            unreached.append(bucket)
    missing = routes.unrouted(queues)
    if missing:
        raise ConfigError(
            f"CRONBOX_SINKS: queue(s) {', '.join(repr(q) for q in missing)} have no route; add "
            f"`{missing[0]}=<url|log|postgres|elsewhere>` or a default `*=...`")
    if unreached:
        event(log, "the queues of buckets on an unreachable worker node are not checked yet: starting, they are"
              " checked once their node is reached", level=logging.WARNING, buckets=len(unreached))
    return unreached


async def watch_unrouted(pool, routes: Routes, waker: Waker, every: float,
                         buckets: Sequence[int | None] = (None,), unchecked: Sequence[int] = ()) -> None:
    """Queues that appear later with no route: their messages stay in the outbox; say so loudly.
    `buckets` as check_routes reads them (a bucket whose node is unreachable is looked at again at
    the next round); `unchecked`: buckets whose queues check_routes could not read at start (a
    worker node down), each read once it is reached, any of its queues without a route logged."""
    if routes.default is not None:
        return  # every queue has a route
    pending = set(unchecked)
    async for _ in ticks(waker.stop, every):
        passed_over = 0
        for bucket in [*buckets, *sorted(pending)]:
            try:
                if bucket in pending:
                    for queue in routes.unrouted(await store.known_queues(pool, bucket)):
                        event(log, "queue has no route: its messages will wait in the outbox", level=logging.ERROR,
                              queue=queue, hint="add it to CRONBOX_SINKS (or `elsewhere`)")
                    pending.discard(bucket)  # type: ignore[arg-type]
                    continue
                for queue, n in await store.unrouted_in_outbox(pool, routes, bucket):
                    event(log, "queue has no route: its messages wait in the outbox", level=logging.ERROR,
                          queue=queue, messages=n, hint="add it to CRONBOX_SINKS (or `elsewhere`)")
            except Exception as exc:  # a check must never stop delivery
                if bucket is not None and db.node_unreachable(exc):
                    passed_over += 1  # its worker node is down: looked at again next round
                    continue
                event(log, "unrouted check failed", level=logging.WARNING, bucket=bucket, error=db.explain(exc))
        if passed_over:
            event(log, "unrouted check passed over buckets whose worker node is unreachable", level=logging.WARNING,
                  buckets=passed_over)


async def watch_named(relay: Any, every: float) -> None:
    """Cronbox's own queues (notifications, stakeholder mail and webhooks) this relay does not
    name and another live relay's route does: left to that relay (a relay never consumes what
    another relay's route names). From the registry (cronbox.processes): before the first
    claim, then every `every` seconds."""
    unnamed = [q for q in OWN_ROUTE_QUEUES if q not in relay.routes.by_queue]
    if not unnamed:
        return
    async for _ in ticks(relay.waker.stop, every, first=True):
        try:
            named = await store.named_by_other_relays(relay.pool, relay.owner, unnamed)
        except Exception as exc:  # a check must never stop delivery
            event(log, "route check failed", level=logging.WARNING, error=db.explain(exc))
            named = relay.yielded
        if named != relay.yielded:
            event(log, "another relay's route names these queues: leaving them to it" if named
                  else "no other relay names these queues: this relay sends them", queues=sorted(named or unnamed))
        relay.yielded = named
        relay.routes_checked.set()
