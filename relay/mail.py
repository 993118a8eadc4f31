"""The stakeholder sinks: a job's own recipients (`schedule(..., notify => ARRAY[...])`).

The database writes one outbox row per recipient and event (or digest of events: docs/runs.md,
"Stakeholders") on the queue `cronbox.mail` (mailto: addresses) or `cronbox.webhooks` (http(s)
URLs). They travel like any queue: claimed in batches, retried with backoff, dead-lettered after
CRONBOX_RELAY_MAX_ATTEMPTS, behind the queue's circuit breaker. Like cronbox.notifications they
never follow the `*` route; unrouted, they go to the log sink.

    cronbox.mail=smtp://relay@mail.example.com:587 from=cronbox@example.com password_env=SMTP_PASSWORD
    cronbox.webhooks=webhook secret_env=HOOK_SECRET

Mail (`smtp://` with STARTTLS, required unless `starttls=no`; `smtps://` for TLS from the first
byte; aiosmtplib): one connection per batch, LOGIN/PLAIN when the URL names a user (the password
from `password_env` or `password_file`, never in CRONBOX_SINKS or a log line), one message per
row with its idempotency key as Message-ID. The server's 5xx answer to a message (recipient or
content refused) is final: that row is dead-lettered; a 4xx answer, a timeout or a connection
failure is retried, and counts for the breaker. `cafile=` trusts a private CA (tests).

Webhooks (`webhook`): each row is POSTed as JSON to its own `to` URL (the address the schedule
named), with the HMAC signature header when `secret_env`/`secret_file` is set, classified as the
http sink classifies answers (2xx sent, 408/429/5xx retried, other 4xx final). Its breaker is off
unless `breaker=N` is given: one recipient's broken hook must not stop the others' messages.
"""

from __future__ import annotations

import dataclasses
import email.utils
import logging
import socket
import ssl
from collections.abc import Mapping, Sequence
from email.message import EmailMessage
from typing import Any
from urllib.parse import unquote, urlsplit

import aiohttp
import aiosmtplib
import orjson

from cronbox.config import ConfigError, parse_duration
from cronbox.log import event
from relay.routes import MAX_TIMEOUT, Route
from relay.sinks import Answer, Report, Row, post

log = logging.getLogger("cronbox.relay")

MAIL_QUEUE = "cronbox.mail"
WEBHOOK_QUEUE = "cronbox.webhooks"
STAKEHOLDER_QUEUES = (MAIL_QUEUE, WEBHOOK_QUEUE)
MAX_EVENTS_SHOWN = 10


@dataclasses.dataclass(frozen=True)
class MailServer:
    """Where and how a mail route sends (the password is the Route's secret)."""
    host: str
    port: int
    tls: str                   # 'starttls' (required), 'implicit' (smtps) or 'none'
    username: str | None
    sender: str
    cafile: str | None = None


def _secret(queue: str, key: str, value: str, env: Mapping[str, str]) -> tuple[str, bytes]:
    from relay.routes import _read_secret  # one reader of secrets for every route kind
    return _read_secret(queue, key.replace("password", "secret"), value, env)


def parse_mail_route(queue: str, target: str, options: list[str], env: Mapping[str, str]) -> Route:
    """`smtp://[user@]host[:port]` or `smtps://...` with options from=, starttls=yes|no, cafile=,
    password_env=/password_file=, timeout=, inflight=, breaker=."""
    url = urlsplit(target)
    if url.scheme not in ("smtp", "smtps") or not url.hostname or url.path not in ("", "/") or url.password:
        raise ConfigError(f"CRONBOX_SINKS: {queue}: expected smtp://[user@]host[:port] or smtps://..., got {target!r} "
                          "(the password goes in password_env or password_file)")
    try:
        port = url.port or (465 if url.scheme == "smtps" else 587)
    except ValueError:
        raise ConfigError(f"CRONBOX_SINKS: {queue}: bad port in {target!r}") from None
    fields: dict[str, Any] = {}
    tls = "implicit" if url.scheme == "smtps" else "starttls"
    sender = f"cronbox@{socket.getfqdn()}"
    cafile = None
    for opt in options:
        key, sep, value = opt.partition("=")
        if not sep or not value:
            raise ConfigError(f"CRONBOX_SINKS: {queue}: expected option=value, got {opt!r}")
        if key == "from":
            if "@" not in value or any(c.isspace() or c in "<>\"," for c in value):
                raise ConfigError(f"CRONBOX_SINKS: {queue}: from must be one mail address, got {value!r}")
            sender = value
        elif key == "starttls" and url.scheme == "smtp":
            if value not in ("yes", "no"):
                raise ConfigError(f"CRONBOX_SINKS: {queue}: starttls must be yes or no, got {value!r}")
            tls = "starttls" if value == "yes" else "none"
        elif key == "cafile":
            cafile = value
        elif key in ("password_env", "password_file"):
            if "secret" in fields:
                raise ConfigError(f"CRONBOX_SINKS: {queue}: give one of password_env, password_file")
            fields["secret_from"], fields["secret"] = _secret(queue, key, value, env)
        elif key == "timeout":
            seconds = parse_duration(f"CRONBOX_SINKS: {queue}: timeout", value).total_seconds()
            if not 0 < seconds <= MAX_TIMEOUT:
                raise ConfigError(f"CRONBOX_SINKS: {queue}: timeout must be positive and at most {MAX_TIMEOUT:g}s")
            fields["timeout"] = seconds
        elif key in ("inflight", "breaker"):
            if not value.isdigit() or not (0 if key == "breaker" else 1) <= int(value) <= 1_000_000:
                raise ConfigError(f"CRONBOX_SINKS: {queue}: {key} must be an integer, got {value!r}")
            fields[key] = int(value)
        else:
            raise ConfigError(f"CRONBOX_SINKS: {queue}: unknown mail option {key!r} (from, starttls, cafile, "
                              "password_env, password_file, timeout, inflight, breaker)")
    username = unquote(url.username) if url.username else None
    if username and "secret" not in fields:
        raise ConfigError(f"CRONBOX_SINKS: {queue}: {target} names a user: give password_env or password_file")
    server = MailServer(url.hostname, port, tls, username, sender, cafile)
    return Route(queue=queue, kind="mail", url=f"{url.scheme}://{url.hostname}:{port}", target=server, **fields)


def _decode(row: Row) -> dict[str, Any] | None:
    try:
        message = orjson.loads(row.body)
    except orjson.JSONDecodeError:
        return None
    return message if isinstance(message, dict) else None


def compose(message: dict[str, Any], sender: str, key: str) -> EmailMessage:
    """The mail of one stakeholder message: a subject that says job, event and count, a plain
    text body with the latest events."""
    job = str(message.get("job") or "?")
    count = message.get("count") if isinstance(message.get("count"), int) else 1
    kind = str(message.get("event") or "event")
    events = message.get("events") if isinstance(message.get("events"), list) else []
    mail = EmailMessage()
    mail["From"] = sender
    mail["To"] = str(message.get("to") or "").removeprefix("mailto:")
    mail["Subject"] = (f"[cronbox] {job}: {kind}" if count == 1
                       else f"[cronbox] {job}: {count} events ({kind} first) since {message.get('first_at')}")
    mail["Date"] = email.utils.formatdate(localtime=False)
    mail["Message-ID"] = f"<{key.replace(':', '.')}@cronbox>"
    mail["Auto-Submitted"] = "auto-generated"
    lines = [f"Job {job}: {count} event(s) from {message.get('first_at')} to {message.get('last_at')}.", ""]
    if count > len(events):
        lines.append(f"The latest {len(events)}:")
    for e in events[-MAX_EVENTS_SHOWN:]:
        if not isinstance(e, dict):
            continue
        what = ", ".join(f"{k}: {e[k]}" for k in ("run_id", "fire_at", "attempt", "state", "pool", "reason")
                         if e.get(k) is not None)
        lines.append(f"- {e.get('at')} {e.get('event')}: {e.get('error') or e.get('reason') or ''}".rstrip())
        if what:
            lines.append(f"  {what}")
    lines += ["", "-- ", "cronbox: this job names you in schedule(..., notify => ...)."]
    mail.set_content("\n".join(lines)[:100_000])
    return mail


def _tls_context(server: MailServer) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=server.cafile)


async def send_mail(route: Route, rows: Sequence[Row], report: Report, timeout: float) -> bool:
    """Send one batch over one SMTP connection; results land in report. Returns whether the
    server behaved (what the breaker counts): False on a connection, TLS, login or timeout
    failure, or a 4xx answer."""
    server: MailServer = route.target
    mails: list[tuple[int, EmailMessage, str]] = []
    for row in rows:
        message = _decode(row)
        to = str(message.get("to") or "") if message else ""
        if message is None or not to.lower().startswith("mailto:"):
            report.fail([row.outbox_id], "undeliverable: not a stakeholder mail message", retryable=False)
            continue
        mails.append((row.outbox_id, compose(message, server.sender, row.key), to[len("mailto:"):]))
    if not mails:
        return True
    smtp = aiosmtplib.SMTP(hostname=server.host, port=server.port, timeout=timeout,
                           use_tls=server.tls == "implicit", start_tls=server.tls == "starttls",
                           tls_context=_tls_context(server) if server.tls != "none" else None)
    sane = True
    try:
        async with smtp:
            if server.username:
                await smtp.login(server.username, (route.secret or b"").decode())
            for oid, mail, to in mails:
                try:
                    await smtp.send_message(mail, recipients=[to])
                    report.ok.append(oid)
                except aiosmtplib.SMTPRecipientsRefused as exc:
                    codes = [r.code for r in exc.recipients]
                    report.fail([oid], f"SMTP refused {to}: {'; '.join(str(r) for r in exc.recipients)[:300]}",
                                retryable=not all(c >= 500 for c in codes))
                    sane = sane and all(c >= 500 for c in codes)
                except aiosmtplib.SMTPResponseException as exc:
                    report.fail([oid], f"SMTP {exc.code}: {exc.message[:300]}", retryable=exc.code < 500)
                    sane = sane and exc.code >= 500
    except (aiosmtplib.SMTPException, OSError, TimeoutError, ssl.SSLError) as exc:
        done = set(report.ok) | set(report.failed)
        left = [oid for oid, _, _ in mails if oid not in done]
        report.fail(left, f"SMTP {server.host}:{server.port}: {exc.__class__.__name__}: {str(exc)[:300]}")
        event(log, "mail server failed", level=logging.WARNING, queue=route.queue, server=route.url,
              error=exc.__class__.__name__, messages=len(left))
        return False
    return sane


async def send_webhooks(session: aiohttp.ClientSession, route: Route, rows: Sequence[Row], report: Report) -> bool:
    """POST each row to its own `to` URL; returns False when any hook failed as the breaker counts."""
    sane = True
    for row in rows:
        message = _decode(row)
        to = str(message.get("to") or "") if message else ""
        if message is None or not to.lower().startswith(("http://", "https://")):
            report.fail([row.outbox_id], "undeliverable: not a stakeholder webhook message", retryable=False)
            continue
        answer: Answer = await post(session, dataclasses.replace(route, url=to), [row.outbox_id],
                                    row.body.encode(), row.key, False, report)
        sane = sane and answer.sane
    return sane
