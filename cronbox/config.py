"""Configuration from the environment, parsed once into a frozen dataclass and validated.

Every setting is `CRONBOX_*`; the database comes from `DATABASE_URL` (or `CRONBOX_DATABASE_URL`),
else from libpq's own `PG*` variables, passed through untouched.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from datetime import timedelta
from urllib.parse import urlsplit, urlunsplit


class ConfigError(ValueError):
    """A setting is missing or malformed; the message names the variable."""


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}


def parse_duration(name: str, text: str) -> timedelta:
    """'250ms', '5s', '2m', '1h', '1d' or a bare number of seconds."""
    m = _DURATION.match(text)
    if not m:
        raise ConfigError(f"{name}: expected a duration like 500ms, 5s, 2m, 1h, got {text!r}")
    return timedelta(seconds=float(m.group(1)) * _UNIT_SECONDS[m.group(2)])


def _int(env: Mapping[str, str], name: str, default: int, minimum: int = 1) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name}: expected an integer, got {raw!r}") from None
    if value < minimum:
        raise ConfigError(f"{name}: must be at least {minimum}, got {value}")
    return value


def _duration(env: Mapping[str, str], name: str, default: str) -> timedelta:
    value = parse_duration(name, env.get(name) or default)
    if value <= timedelta(0):
        raise ConfigError(f"{name}: must be positive, got {env.get(name)!r}")
    return value


def _choice(env: Mapping[str, str], name: str, default: str, choices: tuple[str, ...]) -> str:
    value = (env.get(name) or default).lower()
    if value not in choices:
        raise ConfigError(f"{name}: must be one of {', '.join(choices)}, got {value!r}")
    return value


def redact_dsn(dsn: str) -> str:
    """The DSN with any password replaced by '***' (URL or key=value form)."""
    if "://" in dsn:
        parts = urlsplit(dsn)
        if parts.password is not None:
            netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
            parts = parts._replace(netloc=netloc)
        query = re.sub(r"(password=)[^&]*", r"\1***", parts.query)
        return urlunsplit(parts._replace(query=query))
    return re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1***", dsn)


@dataclasses.dataclass(frozen=True)
class Config:
    dsn: str
    log_level: str = "info"
    log_format: str = "text"
    # poller
    horizon: timedelta = timedelta(minutes=2)
    saturate_batch: int = 500
    dispatch_batch: int = 1000
    poll_interval: timedelta = timedelta(seconds=1)
    dispatch_tick_cap: int = 0          # max runs dispatched per wake-up; 0 = no cap
    reap_interval: timedelta = timedelta(seconds=1)
    retention: timedelta = timedelta(days=30)  # run history kept (whole daily partitions)
    # relay
    relay_batch: int = 500
    relay_lease: timedelta = timedelta(seconds=30)
    sinks: str = ""
    # process
    shutdown_timeout: timedelta = timedelta(seconds=10)
    metrics_port: int = 0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Config:
        env = os.environ if env is None else env
        dsn = env.get("CRONBOX_DATABASE_URL") or env.get("DATABASE_URL") or ""
        return cls(
            dsn=dsn,
            log_level=_choice(env, "CRONBOX_LOG_LEVEL", "info", ("debug", "info", "warning", "error")),
            log_format=_choice(env, "CRONBOX_LOG_FORMAT", "text", ("text", "json")),
            horizon=_duration(env, "CRONBOX_HORIZON", "2m"),
            saturate_batch=_int(env, "CRONBOX_SATURATE_BATCH", 500),
            dispatch_batch=_int(env, "CRONBOX_DISPATCH_BATCH", 1000),
            poll_interval=_duration(env, "CRONBOX_POLL_INTERVAL", "1s"),
            dispatch_tick_cap=_int(env, "CRONBOX_DISPATCH_TICK_CAP", 0, minimum=0),
            reap_interval=_duration(env, "CRONBOX_REAP_INTERVAL", "1s"),
            retention=_duration(env, "CRONBOX_RETENTION", "30d"),
            relay_batch=_int(env, "CRONBOX_RELAY_BATCH", 500),
            relay_lease=_duration(env, "CRONBOX_RELAY_LEASE", "30s"),
            sinks=env.get("CRONBOX_SINKS", ""),
            shutdown_timeout=_duration(env, "CRONBOX_SHUTDOWN_TIMEOUT", "10s"),
            metrics_port=_int(env, "CRONBOX_METRICS_PORT", 0, minimum=0),
        )

    def describe(self) -> dict[str, object]:
        """Effective values for the start-up log line, secrets redacted."""
        out: dict[str, object] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name == "dsn":
                value = redact_dsn(value) if value else "(libpq PG* environment)"
            elif isinstance(value, timedelta):
                value = f"{value.total_seconds():g}s"
            out[field.name] = value
        return out
