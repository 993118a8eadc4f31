"""Sinks and routing: which queue goes where.

CRONBOX_SINKS is a `;`-separated list of `queue=target`, where target is an http(s) URL,
`log` (print the message, for development) or `postgres` (pull mode: left in the outbox for
`cronbox.claim_runs`). `*` matches every queue not named. Example:
    CRONBOX_SINKS="default=http://127.0.0.1:8080/run;reports=log;*=postgres"
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp
import orjson

from cronbox.config import ConfigError
from cronbox.log import event

log = logging.getLogger("cronbox.relay")


@dataclasses.dataclass(frozen=True)
class Outcome:
    ok: bool
    error: str | None = None


@dataclasses.dataclass(frozen=True)
class Routes:
    by_queue: Mapping[str, str]
    default: str | None

    def target(self, queue: str) -> str | None:
        return self.by_queue.get(queue, self.default)

    def pushed_queues(self) -> list[str] | None:
        """Queues the relay claims: None = all (a `*` push route), else the named push queues."""
        if self.default is not None and self.default != "postgres":
            return None
        return [q for q, t in self.by_queue.items() if t != "postgres"]


def parse_routes(text: str) -> Routes:
    by_queue: dict[str, str] = {}
    default: str | None = None
    for part in filter(None, (p.strip() for p in text.split(";"))):
        queue, sep, target = part.partition("=")
        queue, target = queue.strip(), target.strip()
        if not sep or not queue or not target:
            raise ConfigError(f"CRONBOX_SINKS: expected queue=target, got {part!r}")
        if not (target in ("log", "postgres") or target.startswith(("http://", "https://"))):
            raise ConfigError(f"CRONBOX_SINKS: target for {queue!r} must be an http(s) URL, log or postgres, got {target!r}")
        if queue == "*":
            default = target
        else:
            by_queue[queue] = target
    if not by_queue and default is None:
        raise ConfigError("CRONBOX_SINKS: no routes; set e.g. CRONBOX_SINKS='*=log' or 'default=http://host/run'")
    return Routes(by_queue, default)


async def send_log(messages: Sequence[dict[str, Any]]) -> list[Outcome]:
    for m in messages:
        event(log, "message", run_id=m.get("run_id"), job=m.get("job"), queue=m.get("queue"), message=m)
    return [Outcome(True) for _ in messages]


async def send_http(session: aiohttp.ClientSession, url: str, message: dict[str, Any]) -> Outcome:
    headers = {"Content-Type": "application/json"}
    if "idempotency_key" in message:
        headers["Idempotency-Key"] = str(message["idempotency_key"])
    try:
        async with session.post(url, data=orjson.dumps(message), headers=headers) as resp:
            await resp.read()
            if 200 <= resp.status < 300:
                return Outcome(True)
            return Outcome(False, f"HTTP {resp.status}")
    except (aiohttp.ClientError, TimeoutError) as exc:
        return Outcome(False, f"{exc.__class__.__name__}: {exc}")
