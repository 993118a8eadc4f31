"""Logging: one line per event, readable text or JSON (CRONBOX_LOG_FORMAT=json).

Structured fields go in `extra={"fields": {...}}`; `event(logger, msg, **fields)` is the
short form used across the processes.

Secrets never reach the output: every formatted line (message, fields, traceback) passes
through `mask()`, which replaces the secret values of the environment (the DSN password,
PGPASSWORD, secret-looking CRONBOX_* values; registered by `setup()`) and anything that looks
like `password=...`, `secret: ...`, `token=...` or a URL password with '***'.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Iterable
from datetime import datetime, timezone

import orjson

from cronbox.config import redact, secret_values
from cronbox.text import printable

_secrets: list[str] = []


def add_secrets(values: Iterable[str]) -> None:
    """Mask these strings (and their JSON-escaped forms) in every log line from now on."""
    for v in values:
        for form in (v, orjson.dumps(v).decode()[1:-1]):
            if form and form not in _secrets:
                _secrets.append(form)
    _secrets.sort(key=len, reverse=True)  # longest first: a secret containing another


def mask(line: str) -> str:
    for secret in _secrets:
        if secret in line:
            line = line.replace(secret, "***")
    return redact(line)


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        doc.update(getattr(record, "fields", {}) or {})
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        try:
            line = orjson.dumps(doc, default=str).decode()
        except TypeError:  # a lone surrogate in some text: still one valid JSON line
            line = orjson.dumps({k: _json_safe(v) for k, v in doc.items()}, default=str).decode()
        # orjson leaves DEL, C1 controls, line/paragraph separators and bidi controls raw:
        # escape them (valid JSON) so a line stays one line and inert on a terminal.
        return mask(_JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", line))


_JSON_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def _json_safe(value: object) -> object:
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value if isinstance(value, int | float | bool | None) else _json_safe(str(value))


class _TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = datetime.fromtimestamp(record.created, timezone.utc).strftime("%H:%M:%S.%f")[:-3]
        fields = getattr(record, "fields", {}) or {}
        # Values may hold what users and workers wrote: no control character reaches the terminal.
        tail = "".join(f" {k}={printable(v)}" for k, v in fields.items())
        line = f"{ts} {record.levelname.lower():<7} {record.name}: {printable(record.getMessage())}{tail}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return mask(line)


def setup(level: str = "info", fmt: str = "text") -> None:
    add_secrets(secret_values(os.environ))
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonFormatter() if fmt == "json" else _TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Library chatter stays at warning unless asked for.
    for noisy in ("psycopg", "psycopg.pool", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))


def event(logger: logging.Logger, msg: str, *, level: int = logging.INFO, **fields: object) -> None:
    if logger.isEnabledFor(level):
        logger.log(level, msg, extra={"fields": fields})
