"""Configuration from the environment, parsed once into frozen dataclasses and validated.

Every setting is `CRONBOX_*`; the database comes from `DATABASE_URL` (or `CRONBOX_DATABASE_URL`),
else from libpq's own `PG*` variables, passed through untouched.

Each setting is declared once, as a dataclass field made by `setting()`: its variable, its
default (as a user would write it), its parser and one line of help. `Settings.from_env`
parses and validates from those declarations, `describe()` logs the effective values without
secrets, and `env_help()` writes the variable list that `cronbox <command> --help` prints: the
help cannot drift from the code. Each process owns its settings class (poller/settings.py,
relay/settings.py, web/settings.py, cronbox/worker/settings.py); `Config` here holds only what
several commands share (database, logging, metrics and health, shutdown, start-up).
"""

from __future__ import annotations

import dataclasses
import os
import re
import textwrap
from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from typing import Any, ClassVar
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


def format_duration(seconds: float) -> str:
    """A duration as a user would write it: 30d, 2h, 5m, 10s, 500ms, 1.5s (never 2.592e+06s)."""
    if seconds == 0:
        return "0s"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size and float(seconds / size).is_integer():
            return f"{int(seconds // size)}{unit}"
    if seconds < 0.001:
        return f"{seconds * 1000:g}ms"
    if seconds < 1 and float(round(seconds * 1000, 6)).is_integer():
        return f"{int(round(seconds * 1000))}ms"
    return f"{seconds:.3f}".rstrip("0").rstrip(".") + "s"


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
# The key starts at a word boundary and its parts are bounded, so a long word (a worker's error
# text, a payload) costs linear time, never a backtracking blow-up.
_SECRET_PAIR = re.compile(
    r"""(?i)(["']?\b[\w.-]{0,40}?(?:secret|password|passwd|pwd|token|api[_-]?key|hmac)[\w.-]{0,40}["']?\s{0,8}[=:]\s{0,8})"""
    r"""("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[^\s"'&;,|}]+)""")
# The scheme starts where a word starts and nothing in it backtracks (possessive, bounded): a
# long run of `a://` costs linear time too.
_URL_PASSWORD = re.compile(r"(?i)(?<![a-z0-9+.-])([a-z][a-z0-9+.-]{0,31}+://[^:/@\s]{1,256}+:)([^@\s]{1,256}+)(@)")
# Not secrets: where a secret comes from (secret_env=NAME names a variable, secret_file= a
# path) and the words settings use to say whether one is set.
_NOT_SECRET_KEY = re.compile(r"(?i)_(?:env|file|from)[\"']?\s*[=:]\s*$")
_NOT_SECRET_VALUE = {"none", "set", "unset", "***", "null", "true", "false"}


def _is_secret(m: re.Match[str]) -> bool:
    return not _NOT_SECRET_KEY.search(m.group(1)) and _unquote(m.group(2)).lower() not in _NOT_SECRET_VALUE


def _mask(m: re.Match[str]) -> str:
    value = m.group(2)
    if not _is_secret(m):
        return m.group(0)
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
    for name in ("CRONBOX_DATABASE_URL", "DATABASE_URL", "CRONBOX_LISTEN_DSN"):
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
            if _is_secret(m):
                found.add(_unquote(m.group(2)))
        for m in _URL_PASSWORD.finditer(value):
            found.add(m.group(2))
    return {v for v in found if len(v) >= 4}


def psycopg_conninfo_password(dsn: str) -> str | None:
    if not dsn:
        return None
    from psycopg.conninfo import conninfo_to_dict

    return conninfo_to_dict(dsn).get("password")  # type: ignore[return-value]


def listen_target(dsn: str, listen_dsn: str) -> str | None:
    """The DSN the LISTEN connection uses (CRONBOX_LISTEN_DSN): empty = the main one, `off` =
    none (the loops poll every CRONBOX_POLL_INTERVAL)."""
    if not listen_dsn:
        return dsn
    return None if listen_dsn.lower() == "off" else listen_dsn


def describe_listen_dsn(value: str) -> str:
    if not value:
        return "(same as the database URL)"
    return "off (polling only)" if value.lower() == "off" else redact_dsn(value)



# --- declarations ---------------------------------------------------------------------------
Parser = Callable[[str, str], Any]  # (variable name, text) -> value; raises ConfigError


def duration(*, zero_ok: bool = False, seconds: bool = False, maximum: str | None = None) -> Parser:
    """A duration ('250ms', '5s', '2m', '1h', '1d', or bare seconds): positive (or zero when
    zero_ok), at most `maximum`; a timedelta, or float seconds when `seconds`."""
    cap = parse_duration("maximum", maximum) if maximum else None

    def parse(name: str, text: str) -> Any:
        value = parse_duration(name, text)
        if value < timedelta(0) or (value == timedelta(0) and not zero_ok):
            raise ConfigError(f"{name}: must be {'zero or more' if zero_ok else 'positive'}, got {text!r}")
        if cap is not None and value > cap:
            raise ConfigError(f"{name}: must be at most {maximum}, got {text!r}")
        return value.total_seconds() if seconds else value
    parse.kind = "duration"  # type: ignore[attr-defined]
    return parse


def integer(minimum: int = 1, maximum: int | None = None) -> Parser:
    def parse(name: str, text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ConfigError(f"{name}: expected an integer, got {text!r}") from None
        if value < minimum:
            raise ConfigError(f"{name}: must be at least {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise ConfigError(f"{name}: must be at most {maximum}, got {value}")
        return value
    parse.kind = "integer"  # type: ignore[attr-defined]
    return parse


def choice(*options: str) -> Parser:
    def parse(name: str, text: str) -> str:
        value = text.lower()
        if value not in options:
            raise ConfigError(f"{name}: must be one of {', '.join(options)}, got {value!r}")
        return value
    parse.kind = "|".join(options)  # type: ignore[attr-defined]
    return parse


def text() -> Parser:
    def parse(name: str, value: str) -> str:
        return value
    parse.kind = "text"  # type: ignore[attr-defined]
    return parse


def stripped() -> Parser:
    def parse(name: str, value: str) -> str:
        return value.strip()
    parse.kind = "text"  # type: ignore[attr-defined]
    return parse


def setting(env: str | tuple[str, ...], default: str, parse: Parser, help: str, *,
            secret: bool = False, shown: str | None = None, value: Any = dataclasses.MISSING) -> Any:
    """A dataclass field read from the environment variable(s) `env` (the first one set wins).
    `default` is the text a user would write; the field's default is that text parsed (or
    `value` when the default is computed at load time, shown in help as `shown`)."""
    names = (env,) if isinstance(env, str) else tuple(env)
    if value is dataclasses.MISSING:
        value = parse(names[0], default)
    metadata = {"env": names, "default": default if shown is None else shown, "parse": parse, "help": help,
                "secret": secret}
    if isinstance(value, (dict, list, set)):  # a fresh copy per instance
        return dataclasses.field(default_factory=lambda: type(value)(value), metadata=metadata)
    return dataclasses.field(default=value, metadata=metadata)


def declared(cls: type) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls) if "env" in f.metadata]


class Settings:
    """Base of the frozen settings dataclasses: load from the environment, describe, help."""

    prefix: ClassVar[str] = ""  # prepended to field names in describe() (the start-up log line)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Any:
        """Every declared field from its variable (unset or empty: the default), then
        `overrides` (constructor arguments, command-line options), then check()."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for f in declared(cls):
            for name in f.metadata["env"]:
                raw = env.get(name)
                if raw:
                    values[f.name] = f.metadata["parse"](name, raw)
                    break
        values.update({k: v for k, v in overrides.items() if v is not None})
        obj = cls(**values)
        obj.check()
        return obj

    def check(self) -> None:
        """Rules between fields; raise ConfigError naming the variable."""

    def describe(self) -> dict[str, object]:
        """Effective values for the start-up log line, secrets redacted."""
        out: dict[str, object] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.metadata.get("secret"):
                value = "set" if value else "none"
            elif f.name == "dsn":
                value = redact_dsn(value) if value else "(libpq PG* environment)"
            elif f.name == "listen_dsn":
                value = describe_listen_dsn(value)
            elif isinstance(value, timedelta):
                value = format_duration(value.total_seconds())
            elif isinstance(value, float) and getattr(f.metadata.get("parse"), "kind", "") == "duration":
                value = format_duration(value)
            elif isinstance(value, str):
                value = redact(value)
            out[self.prefix + f.name] = value
        return out


def check_dispatch_lead(lead: timedelta, other: timedelta, what: str) -> None:
    """Early dispatch holds messages up to the lead before their time: it must end well inside
    the relay's lease (the lease runs from the due time) and the poller's horizon."""
    if lead > other / 2:
        raise ConfigError(f"CRONBOX_DISPATCH_LEAD: must be at most {(other / 2).total_seconds():g}s (half {what}), "
                          f"got {lead.total_seconds():g}s")


def env_help(*classes: type, only: Iterable[str] | None = None, title: str = "environment") -> str:
    """The variables of these settings classes as help text: name, default, what it does. A
    variable listed by several classes is shown once; `only` keeps those fields of the first
    class (a command that uses part of the shared Config)."""
    keep = set(only) if only is not None else None
    lines = [f"{title} (default in brackets):"]
    seen: set[str] = set()
    for i, cls in enumerate(classes):
        for f in declared(cls):
            if i == 0 and keep is not None and f.name not in keep:
                continue
            names = f.metadata["env"]
            if names[0] in seen:
                continue
            seen.add(names[0])
            default = f.metadata["default"]
            shown = f"[{default}]" if default != "" else "[unset]"
            what = f"{f.metadata['help']} {shown}"
            label = " or ".join(names)
            body = textwrap.wrap(what, 78 - 6)
            lines.append(f"  {label}")
            lines.extend(f"      {part}" for part in body)
    return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class Config(Settings):
    """What several commands share (COMMON_FOR says which command uses which, for --help)."""

    dsn: str = setting(("CRONBOX_DATABASE_URL", "DATABASE_URL"), "", text(),
                       "the database (libpq URL or key=value; multi-host with target_session_attrs=read-write); "
                       "unset: libpq's PG* variables", shown="")
    log_level: str = setting("CRONBOX_LOG_LEVEL", "info", choice("debug", "info", "warning", "error"),
                             "log level: debug, info, warning, error")
    log_format: str = setting("CRONBOX_LOG_FORMAT", "text", choice("text", "json"), "log lines as text or json")
    connect_timeout: timedelta = setting("CRONBOX_CONNECT_TIMEOUT", "5s", duration(),
                                         "bound on each connection attempt (per host of a multi-host DSN)")
    startup_timeout: timedelta = setting("CRONBOX_STARTUP_TIMEOUT", "0s", duration(zero_ok=True),
                                         "at start, wait this long for a writable primary (0 = forever)")
    poll_interval: timedelta = setting("CRONBOX_POLL_INTERVAL", "1s", duration(),
                                       "backstop poll when no NOTIFY arrives")
    dispatch_lead: timedelta = setting("CRONBOX_DISPATCH_LEAD", "500ms", duration(zero_ok=True, maximum="1h"),
                                       "early dispatch: hand runs to the relay this long before their time, "
                                       "sent at it (0 = off; at most half the relay lease and the horizon; "
                                       "docs/runs.md)")
    shutdown_timeout: timedelta = setting("CRONBOX_SHUTDOWN_TIMEOUT", "10s", duration(),
                                          "on SIGTERM, time to finish in-flight work")
    metrics_port: int = setting("CRONBOX_METRICS_PORT", "0", integer(0, 65535),
                                "serve /metrics and /healthz on this port (0 = off)")
    metrics_host: str = setting("CRONBOX_METRICS_HOST", "127.0.0.1", text(), "address for /metrics and /healthz")
    health_stale: timedelta = setting("CRONBOX_HEALTH_STALE", "60s", duration(),
                                      "/healthz fails when the loop has not ticked for this long")
    listen_dsn: str = setting("CRONBOX_LISTEN_DSN", "", stripped(),
                              "LISTEN wake-ups: unset = on the database URL, off = none (poll only), "
                              "else this DSN (a direct connection when the database URL goes through "
                              "PgBouncer in transaction mode; docs/operations.md)", shown="")


# The shared settings each command uses (for its --help); the command's own class adds the rest.
BASE = ("dsn", "log_level", "log_format", "connect_timeout")
PROCESS = (*BASE, "startup_timeout", "poll_interval", "dispatch_lead", "shutdown_timeout",
           "metrics_port", "metrics_host", "health_stale", "listen_dsn")
COMMON_FOR: dict[str, tuple[str, ...]] = {
    "migrate": BASE,
    "status": BASE,
    "poller": PROCESS,
    "relay": PROCESS,
    "dev": ("log_level", "log_format", "dsn", "shutdown_timeout"),
    "demo-worker": ("log_level", "log_format", "dsn"),
    "worker": (*BASE, "metrics_port", "metrics_host", "health_stale", "listen_dsn"),
    "web": BASE,
}
