"""Routing: which queue goes to which sink (CRONBOX_SINKS).

A `;`-separated list of routes `queue=target [option=value ...]`; `*` is the default for
every queue not named. Targets:

    http://... / https://...   POST each message (or batches of them) to a worker URL
    log                        print the message (development)
    postgres                   pull mode: left in the outbox for cronbox.claim_runs
    elsewhere                  served by another relay: left in the outbox, not an error
    smtp://... / smtps://...   mail (queue cronbox.mail: a job's own recipients; relay/mail.py)
    webhook                    POST each message to its own `to` URL (queue cronbox.webhooks)

Options (http only): `batch=N` messages per request (N > 1 sends a JSON array, 1 one request
per message), or `batch=auto`, the default: one message per request until the worker declares
that it takes batches (a 2xx answer with the header `Cronbox-Accept-Batch: N`, as the worker
kit answers), then JSON arrays of up to N (relay/lanes.py, "Batches by negotiation");
`timeout=10s` per request (total), `connect_timeout=2s`,
`connections=N` concurrent requests per queue on this route, `inflight=N` claimed messages
per queue being sent at once, `breaker=N` consecutive failed requests that open a queue's
circuit breaker (0 = never), `secret_env=NAME` the environment variable holding the HMAC
secret, or `secret_file=/run/secrets/x`. The secret itself never appears in CRONBOX_SINKS
nor in any log line. Unset options take the relay's defaults (relay/settings.py).

Notifications (queue `cronbox.notifications`, and a job's own recipients: `cronbox.mail`,
`cronbox.webhooks`) never follow the `*` default: they go where a route names that queue. When
none does, a relay writes them to its log, except a dedicated relay (`*=elsewhere`: other
relays serve the rest), which leaves them to the others like any queue it does not name: a
relay serving one queue never consumes what another relay's route names. Example:

    CRONBOX_SINKS="default=http://worker:8080/run batch=100 secret_env=WORKER_SECRET;
                   reports=log; ml=postgres; *=http://fallback:8080/run"
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from cronbox.config import ConfigError, parse_duration

PUSH_KINDS = ("http", "log", "mail", "webhook")
NOTIFY_QUEUE = "cronbox.notifications"
# never routed by `*`: the global notifications and a job's own recipients (relay/mail.py)
OWN_ROUTE_QUEUES = (NOTIFY_QUEUE, "cronbox.mail", "cronbox.webhooks")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_BATCH = 10_000
MAX_TIMEOUT = 3600.0
INT_OPTIONS = {"connections": (1, 10_000), "inflight": (1, 1_000_000), "breaker": (0, 1_000_000)}


@dataclasses.dataclass(frozen=True)
class Route:
    queue: str                      # '*' for the default route
    kind: str                       # http | log | postgres | elsewhere
    url: str | None = None
    batch: int | None = None        # messages per HTTP request; 1 = single mode; None = auto
    timeout: float | None = None    # per-request total timeout (None: the relay default)
    connect_timeout: float | None = None  # per-request connect timeout (None: the relay default)
    connections: int | None = None  # concurrent requests per queue (None: the relay default)
    inflight: int | None = None     # claimed messages per queue in flight (None: the relay default)
    breaker: int | None = None      # consecutive failures that open the breaker (0 = off)
    secret_from: str | None = None  # where the secret came from (env:NAME / file:PATH), for logs
    secret: bytes | None = dataclasses.field(default=None, repr=False, compare=False)
    target: Any = None              # kind-specific settings (mail: relay.mail.MailServer)

    @property
    def push(self) -> bool:
        return self.kind in PUSH_KINDS

    def describe(self) -> str:
        """The route for a log line: never the secret, only where it comes from."""
        parts = [f"{self.queue}={self.url or self.kind}"]
        if self.kind == "http":
            parts.append(f"batch={self.batch or 'auto'}")
            for key in ("timeout", "connect_timeout"):
                if getattr(self, key) is not None:
                    parts.append(f"{key}={getattr(self, key):g}s")
            for key in ("connections", "inflight", "breaker"):
                if getattr(self, key) is not None:
                    parts.append(f"{key}={getattr(self, key)}")
            if self.secret_from:
                parts.append(f"secret={self.secret_from}")
        return " ".join(parts)


@dataclasses.dataclass(frozen=True)
class Routes:
    by_queue: Mapping[str, Route]
    default: Route | None

    def target(self, queue: str) -> Route | None:
        if queue in OWN_ROUTE_QUEUES:
            dedicated = self.default is not None and self.default.kind == "elsewhere"
            return self.by_queue.get(queue, _ELSEWHERE[queue] if dedicated else _LOG_DEFAULTS[queue])
        return self.by_queue.get(queue, self.default)

    def claim_filter(self, blocked: Iterable[str] = ()) -> tuple[list[str] | None, list[str] | None]:
        """(include, exclude) for cronbox.claim_outbox: the relay never claims pull-mode queues,
        nor the `blocked` ones (full lanes, open breakers)."""
        blocked = set(blocked)
        routed = {**self.by_queue, **{q: self.target(q) for q in OWN_ROUTE_QUEUES}}
        if self.default is not None and self.default.push:
            exclude = sorted({q for q, r in routed.items() if r is None or not r.push} | blocked)
            return None, exclude or None
        return sorted(q for q, r in routed.items() if r is not None and r.push and q not in blocked), None

    def unrouted(self, queues: Iterable[str]) -> list[str]:
        return sorted({q for q in queues if self.target(q) is None})

    def describe(self) -> list[str]:
        routes = list(self.by_queue.values()) + ([self.default] if self.default else [])
        routes += [self.target(q) for q in OWN_ROUTE_QUEUES if q not in self.by_queue]
        return [r.describe() for r in routes]


NOTIFY_DEFAULT = Route(queue=NOTIFY_QUEUE, kind="log")
_LOG_DEFAULTS = {q: NOTIFY_DEFAULT if q == NOTIFY_QUEUE else Route(queue=q, kind="log") for q in OWN_ROUTE_QUEUES}
_ELSEWHERE = {q: Route(queue=q, kind="elsewhere") for q in OWN_ROUTE_QUEUES}


def _read_secret(queue: str, key: str, value: str, env: Mapping[str, str]) -> tuple[str, bytes]:
    if key == "secret_env":
        if not _ENV_NAME.match(value):
            raise ConfigError(f"CRONBOX_SINKS: {queue}: secret_env must name an environment variable, got {value!r}")
        secret = env.get(value, "")
        if not secret:
            raise ConfigError(f"CRONBOX_SINKS: {queue}: secret_env={value} but ${value} is not set or empty")
        return f"env:{value}", secret.encode()
    try:
        secret = Path(value).read_bytes().strip()
    except OSError as exc:
        raise ConfigError(f"CRONBOX_SINKS: {queue}: cannot read secret_file {value}: {exc.strerror}") from None
    if not secret:
        raise ConfigError(f"CRONBOX_SINKS: {queue}: secret_file {value} is empty")
    return f"file:{value}", secret


def _route(queue: str, target: str, options: list[str], env: Mapping[str, str]) -> Route:
    if target.startswith(("smtp://", "smtps://")):
        from relay.mail import parse_mail_route  # the mail sink's own options
        return parse_mail_route(queue, target, options, env)
    if target == "webhook":
        return dataclasses.replace(_route(queue, "http://webhook.invalid/", options, env), kind="webhook", url=None)
    if target in ("log", "postgres", "elsewhere"):
        kind, url = target, None
    elif target.startswith(("http://", "https://")):
        kind, url = "http", target
    else:
        raise ConfigError(
            f"CRONBOX_SINKS: target for {queue!r} must be an http(s) URL, log, postgres, elsewhere, smtp(s):// or "
            f"webhook, got {target!r}")
    if options and kind != "http":
        raise ConfigError(f"CRONBOX_SINKS: {queue}: options {' '.join(options)!r} only apply to http targets")
    fields: dict[str, object] = {}
    for opt in options:
        key, sep, value = opt.partition("=")
        if not sep or not value:
            raise ConfigError(f"CRONBOX_SINKS: {queue}: expected option=value, got {opt!r}")
        if key == "batch" and value == "auto":
            fields["batch"] = None
        elif key == "batch":
            if not value.isdigit() or not 1 <= int(value) <= MAX_BATCH:
                raise ConfigError(f"CRONBOX_SINKS: {queue}: batch must be auto or an integer from 1 to {MAX_BATCH}, "
                                  f"got {value!r}")
            fields["batch"] = int(value)
        elif key in ("timeout", "connect_timeout"):
            seconds = parse_duration(f"CRONBOX_SINKS: {queue}: {key}", value).total_seconds()
            if not 0 < seconds <= MAX_TIMEOUT:
                raise ConfigError(f"CRONBOX_SINKS: {queue}: {key} must be positive and at most "
                                  f"{MAX_TIMEOUT:g}s, got {value!r}")
            fields[key] = seconds
        elif key in INT_OPTIONS:
            low, high = INT_OPTIONS[key]
            if not value.isdigit() or not low <= int(value) <= high:
                raise ConfigError(f"CRONBOX_SINKS: {queue}: {key} must be an integer from {low} to {high}, got {value!r}")
            fields[key] = int(value)
        elif key in ("secret_env", "secret_file"):
            if "secret" in fields:
                raise ConfigError(f"CRONBOX_SINKS: {queue}: give one of secret_env, secret_file")
            fields["secret_from"], fields["secret"] = _read_secret(queue, key, value, env)
        else:
            raise ConfigError(f"CRONBOX_SINKS: {queue}: unknown option {key!r} (batch, timeout, connect_timeout, "
                              "connections, inflight, breaker, secret_env, secret_file)")
    if "connect_timeout" in fields and "timeout" in fields and fields["connect_timeout"] > fields["timeout"]:  # type: ignore[operator]
        raise ConfigError(f"CRONBOX_SINKS: {queue}: connect_timeout must not exceed timeout")
    return Route(queue=queue, kind=kind, url=url, **fields)  # type: ignore[arg-type]


def parse_routes(text: str, env: Mapping[str, str] | None = None) -> Routes:
    env = {} if env is None else env
    by_queue: dict[str, Route] = {}
    default: Route | None = None
    for part in filter(None, (p.strip() for p in text.split(";"))):
        queue, sep, rest = part.partition("=")
        queue = queue.strip()
        words = rest.split()
        if not sep or not queue or not words:
            raise ConfigError(f"CRONBOX_SINKS: expected queue=target, got {part!r}")
        if queue in by_queue or (queue == "*" and default is not None):
            raise ConfigError(f"CRONBOX_SINKS: queue {queue!r} is routed twice")
        route = _route(queue, words[0], words[1:], env)
        if queue == "*":
            default = route
        else:
            by_queue[queue] = route
    if not by_queue and default is None:
        raise ConfigError("CRONBOX_SINKS: no routes; set e.g. CRONBOX_SINKS='*=log' or 'default=http://host/run'")
    return Routes(by_queue, default)
