"""The relay's checks beside delivery: every queue has a route (at start, then queues that
appear later), and which of cronbox's own queues another live relay's route names (the relay
leaves those to it). None of them ever stops delivery: a failed check is logged and tried again."""

from __future__ import annotations

import logging
from typing import Any

from cronbox import db
from cronbox.config import ConfigError
from cronbox.log import event
from cronbox.proc import Waker, ticks
from relay import store
from relay.routes import OWN_ROUTE_QUEUES, Routes

log = logging.getLogger("cronbox.relay")
NAMED_EVERY = 5.0  # seconds between looks at the routes other relays name (the registry's heartbeat)


async def check_routes(pool, routes: Routes) -> None:
    """Unrouted queues are an error at start, never a silent drop."""
    missing = routes.unrouted(await db.retrying(lambda: store.known_queues(pool), budget=60, what="queues"))
    if missing:
        raise ConfigError(
            f"CRONBOX_SINKS: queue(s) {', '.join(repr(q) for q in missing)} have no route; add "
            f"`{missing[0]}=<url|log|postgres|elsewhere>` or a default `*=...`")


async def watch_unrouted(pool, routes: Routes, waker: Waker, every: float) -> None:
    """Queues that appear later with no route: their messages stay in the outbox; say so loudly."""
    async for _ in ticks(waker.stop, every):
        try:
            for queue, n in await store.unrouted_in_outbox(pool, routes):
                event(log, "queue has no route: its messages wait in the outbox", level=logging.ERROR,
                      queue=queue, messages=n, hint="add it to CRONBOX_SINKS (or `elsewhere`)")
        except Exception as exc:  # a check must never stop delivery
            event(log, "unrouted check failed", level=logging.WARNING, error=db.explain(exc))


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
