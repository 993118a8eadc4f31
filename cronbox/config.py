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


def env_int(env: Mapping[str, str], name: str, default: int, minimum: int = 1) -> int:
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


def env_duration(env: Mapping[str, str], name: str, default: str, *, zero_ok: bool = False) -> timedelta:
    value = parse_duration(name, env.get(name) or default)
    if value < timedelta(0) or (value == timedelta(0) and not zero_ok):
        raise ConfigError(f"{name}: must be {'zero or more' if zero_ok else 'positive'}, got {env.get(name)!r}")
    return value


def env_choice(env: Mapping[str, str], name: str, default: str, choices: tuple[str, ...]) -> str:
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


# `secret=...`, `password: ...`, `token=...`-looking pairs (key=value, JSON, query strings).
_SECRET_PAIR = re.compile(
    r"""(?i)(["']?[\w.-]*(?:secret|password|passwd|pwd|token|api[_-]?key|hmac)[\w.-]*["']?\s*[=:]\s*)"""
    r"""("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[^\s"'&;,|}]+)""")
_URL_PASSWORD = re.compile(r"(?i)([a-z][a-z0-9+.-]*://[^:/@\s]+:)([^@\s]+)(@)")


def _mask(m: re.Match[str]) -> str:
    value = m.group(2)
    quote = value[0] if value[:1] in ("'", '"') else ""
    return f"{m.group(1)}{quote}***{quote}"


def _unquote(value: str) -> str:
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in ("'", '"') else value


def redact(text: str) -> str:
    """Any text with URL passwords and secret/password/token-looking values replaced by '***'."""
    text = _URL_PASSWORD.sub(r"\1***\3", text)
    return _SECRET_PAIR.sub(_mask, text)


def secret_values(env: Mapping[str, str]) -> set[str]:
    """The secret strings in the environment cronbox reads: the DSN password, PGPASSWORD and
    every value of a CRONBOX_* variable whose name or text looks secret. The log formatter
    masks each of them wherever it appears (cronbox.log.add_secrets)."""
    found: set[str] = set()
    for name in ("CRONBOX_DATABASE_URL", "DATABASE_URL"):
        dsn = env.get(name) or ""
        try:
            password = psycopg_conninfo_password(dsn)
        except Exception:  # a malformed DSN is reported elsewhere; mask nothing here
            password = None
        if password:
            found.add(password)
    if env.get("PGPASSWORD"):
        found.add(env["PGPASSWORD"])
    for name, value in env.items():
        if not name.startswith("CRONBOX_") or not value:
            continue
        if re.search(r"(?i)secret|password|token|key", name):
            found.add(value)
        for m in _SECRET_PAIR.finditer(value):
            found.add(_unquote(m.group(2)))
        for m in _URL_PASSWORD.finditer(value):
            found.add(m.group(2))
    return {v for v in found if len(v) >= 4}


def psycopg_conninfo_password(dsn: str) -> str | None:
    if not dsn:
        return None
    from psycopg.conninfo import conninfo_to_dict

    return conninfo_to_dict(dsn).get("password")  # type: ignore[return-value]


@dataclasses.dataclass(frozen=True)
class Config:
    dsn: str
    log_level: str = "info"
    log_format: str = "text"
    # poller
    horizon: timedelta = timedelta(minutes=2)
    misfire_grace: timedelta = timedelta(seconds=30)  # older unmaterialised fires go to catch-up
    saturate_batch: int = 100
    dispatch_batch: int = 1000
    # early dispatch, on by default (0 = off): see docs/runs.md, "Early dispatch"
    dispatch_lead: timedelta = timedelta(milliseconds=500)
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
    metrics_host: str = "127.0.0.1"
    health_stale: timedelta = timedelta(seconds=60)
    # connections: each attempt bounded (per host of a multi-host DSN); at start, wait for a
    # writable primary this long (0 = forever)
    connect_timeout: timedelta = timedelta(seconds=5)
    startup_timeout: timedelta = timedelta(0)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Config:
        env = os.environ if env is None else env
        dsn = env.get("CRONBOX_DATABASE_URL") or env.get("DATABASE_URL") or ""
        cfg = cls(
            dsn=dsn,
            log_level=env_choice(env, "CRONBOX_LOG_LEVEL", "info", ("debug", "info", "warning", "error")),
            log_format=env_choice(env, "CRONBOX_LOG_FORMAT", "text", ("text", "json")),
            horizon=env_duration(env, "CRONBOX_HORIZON", "2m"),
            misfire_grace=env_duration(env, "CRONBOX_MISFIRE_GRACE", "30s"),
            saturate_batch=env_int(env, "CRONBOX_SATURATE_BATCH", 100),
            dispatch_batch=env_int(env, "CRONBOX_DISPATCH_BATCH", 1000),
            dispatch_lead=env_duration(env, "CRONBOX_DISPATCH_LEAD", "500ms", zero_ok=True),
            poll_interval=env_duration(env, "CRONBOX_POLL_INTERVAL", "1s"),
            dispatch_tick_cap=env_int(env, "CRONBOX_DISPATCH_TICK_CAP", 0, minimum=0),
            reap_interval=env_duration(env, "CRONBOX_REAP_INTERVAL", "1s"),
            retention=env_duration(env, "CRONBOX_RETENTION", "30d"),
            relay_batch=env_int(env, "CRONBOX_RELAY_BATCH", 500),
            relay_lease=env_duration(env, "CRONBOX_RELAY_LEASE", "30s"),
            sinks=env.get("CRONBOX_SINKS", ""),
            shutdown_timeout=env_duration(env, "CRONBOX_SHUTDOWN_TIMEOUT", "10s"),
            metrics_port=env_int(env, "CRONBOX_METRICS_PORT", 0, minimum=0),
            metrics_host=env.get("CRONBOX_METRICS_HOST") or "127.0.0.1",
            health_stale=env_duration(env, "CRONBOX_HEALTH_STALE", "60s"),
            connect_timeout=env_duration(env, "CRONBOX_CONNECT_TIMEOUT", "5s"),
            startup_timeout=env_duration(env, "CRONBOX_STARTUP_TIMEOUT", "0s", zero_ok=True),
        )
        # Early dispatch holds messages up to the lead before their time: it must end well
        # inside the relay's lease (the lease runs from the due time) and the horizon.
        limit = min(cfg.relay_lease / 2, cfg.horizon / 2, timedelta(hours=1))
        if cfg.dispatch_lead > limit:
            raise ConfigError(f"CRONBOX_DISPATCH_LEAD: must be at most {limit.total_seconds():g}s (half the relay "
                              f"lease and the horizon, at most 1h), got {cfg.dispatch_lead.total_seconds():g}s")
        return cfg

    def describe(self) -> dict[str, object]:
        """Effective values for the start-up log line, secrets redacted."""
        out: dict[str, object] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name == "dsn":
                value = redact_dsn(value) if value else "(libpq PG* environment)"
            elif isinstance(value, timedelta):
                value = f"{value.total_seconds():g}s"
            elif isinstance(value, str):
                value = redact(value)
            out[field.name] = value
        return out
