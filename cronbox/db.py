"""Connections: orjson as psycopg's JSON codec, one async pool per process, clear errors.

Connections are opened with prepare_threshold=None: they may outlive a migration that
changes a result type, or sit behind PgBouncer.

Every connection attempt is bounded by time: `connect_timeout` (libpq, per host of a
multi-host DSN) defaults to CRONBOX_CONNECT_TIMEOUT when neither the DSN nor PGCONNECT_TIMEOUT
sets it. The processes' connections (pool, listener) also default to
`target_session_attrs=read-write`, so they never land on (or write to) a standby: with a
multi-host DSN libpq tries each host in turn and keeps the primary. Errors name the
host:port(s) that were tried. An established connection to a host that vanished (a machine
lost in a failover: no RST, packets dropped) is given up after ~10 s instead of TCP's ~15
minutes: TCP keepalives (idle connections) and tcp_user_timeout (unacknowledged data), both
defaults that the DSN may override.

A pool connection whose server refuses a write as read-only (a primary demoted by a failover,
still reached through a pooler or proxy that points at it) is closed and the error raised as
`ServerReadOnly`, a connection error: callers retry the whole transaction as after a lost
connection (on a fresh connection, which libpq's read-write check keeps off a standby), so
nothing is dispatched or acked there; the process logs it and /healthz reports it until a
writable connection is made again (`read_only()`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

import orjson
import psycopg
from psycopg.types.json import Jsonb, set_json_dumps, set_json_loads  # noqa: F401  (Jsonb re-exported)
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from psycopg_pool.base import AttemptWithBackoff
from tenacity import AsyncRetrying, retry_if_exception, stop_after_delay, wait_exponential_jitter

log = logging.getLogger("cronbox.db")
T = TypeVar("T")



class UnreadableJson(str):
    """A jsonb value Python's JSON parser cannot load, kept as its JSON text: PostgreSQL stores
    numbers past a double's range (`1e400`) and nesting past orjson's 1,024 levels. Loading
    one never raises (a page, a claim or a decode must not fail on one value): the value comes
    back as this `str` with `reason`, and code that needs the value itself (the pull worker's
    payloads) checks for it. Rendered, it is the exact text PostgreSQL holds."""

    reason: str = ""


def loads(data: bytes | bytearray | memoryview | str) -> object:
    """psycopg's JSON loader: orjson, and an UnreadableJson for what orjson refuses."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        text = data if isinstance(data, str) else bytes(data).decode("utf-8", "replace")
        value = UnreadableJson(text)
        value.reason = f"JSON Python cannot load ({exc})"
        return value


set_json_dumps(orjson.dumps)
set_json_loads(loads)

CONNECT_KWARGS = {"autocommit": True, "prepare_threshold": None}
CONNECT_TIMEOUT = 5.0  # seconds; `configure()` sets it from CRONBOX_CONNECT_TIMEOUT
# A vanished host is noticed within ~10 s: keepalive probes after 5 s idle, 3 probes 2 s apart;
# data unacknowledged for 10 s closes the connection (Linux; ignored where unsupported).
DEAD_HOST = {"keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 3,
             "tcp_user_timeout": 10000}


def configure(*, connect_timeout: float) -> None:
    global CONNECT_TIMEOUT
    CONNECT_TIMEOUT = connect_timeout


def session_dsn(dsn: str, *, write: bool) -> str:
    """The DSN plus the defaults it does not set itself: a bounded connect_timeout (libpq
    takes whole seconds, at least 2) and, for `write`, target_session_attrs=read-write.
    Whatever the DSN or the PG* environment says wins."""
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    extra: dict[str, object] = {}
    if "connect_timeout" not in info and not os.environ.get("PGCONNECT_TIMEOUT"):
        extra["connect_timeout"] = max(2, math.ceil(CONNECT_TIMEOUT))
    if write and "target_session_attrs" not in info and not os.environ.get("PGTARGETSESSIONATTRS"):
        extra["target_session_attrs"] = "read-write"
    extra.update({k: v for k, v in DEAD_HOST.items() if k not in info})
    return psycopg.conninfo.make_conninfo(dsn, **extra) if extra else dsn


def targets(dsn: str | None) -> str:
    """The host:port pairs a DSN makes libpq try, for log lines and error messages."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(dsn or "")
    except psycopg.Error:
        return "(unparsable DSN)"
    hosts = str(info.get("host") or info.get("hostaddr") or os.environ.get("PGHOST") or "localhost").split(",")
    ports = str(info.get("port") or os.environ.get("PGPORT") or "5432").split(",")
    if len(ports) == 1:
        ports = ports * len(hosts)
    return ", ".join(f"{h or 'localhost'}:{p or '5432'}" for h, p in zip(hosts, ports, strict=False))


_last_dsn: str | None = None  # the process's pool DSN, so retry logs can name the hosts

READ_ONLY = ("the database is read-only (a standby: a demoted primary, or a pooler or proxy still "
             "pointing at one): nothing is dispatched or acked there until a writable primary answers")


class ServerReadOnly(psycopg.OperationalError):
    """A write refused because the server is read-only; raised in place of the statement's
    ReadOnlySqlTransaction so that every caller treats it as a lost connection."""


_read_only_since: float | None = None  # monotonic time a read-only server was last met, until a writable one


def _note_read_only() -> None:
    global _read_only_since
    if _read_only_since is None:
        _read_only_since = time.monotonic()
        log.warning(READ_ONLY, extra={"fields": {"tried": targets(_last_dsn)}})


def _note_writable() -> None:
    global _read_only_since
    if _read_only_since is not None:
        log.warning("a writable primary answers again", extra={"fields": {
            "tried": targets(_last_dsn), "read_only_s": round(time.monotonic() - _read_only_since, 1)}})
        _read_only_since = None


def read_only() -> str | None:
    """Why this process cannot write, when its last server was read-only (for /healthz)."""
    if _read_only_since is None:
        return None
    return f"{READ_ONLY} (for {time.monotonic() - _read_only_since:.0f}s, tried {targets(_last_dsn)})"


def explain(exc: BaseException, dsn: str | None = None) -> str:
    """One line for an operator: what went wrong talking to PostgreSQL (for a connection
    error: also which host:port(s) were tried)."""
    if isinstance(exc, psycopg.errors.UndefinedFunction | psycopg.errors.InvalidSchemaName) or (
        isinstance(exc, psycopg.errors.UndefinedTable) and "cronbox" in str(exc)
    ):
        return "the cronbox schema is missing or out of date: run `cronbox migrate`"
    if isinstance(exc, ServerReadOnly) or (isinstance(exc, psycopg.OperationalError) and (
            "session is read-only" in str(exc) or (isinstance(exc, PoolTimeout) and _read_only_since is not None))):
        return f"{READ_ONLY} (tried {targets(dsn or _last_dsn)})"
    if node_unreachable(exc):  # the statement's error, the process's own connection fine
        assert isinstance(exc, psycopg.Error)
        return f"a Citus worker node is unreachable: {(exc.diag.message_primary or str(exc)).strip()}"
    if isinstance(exc, psycopg.OperationalError):
        text = str(exc).strip().splitlines()
        msg = text[-1] if text else exc.__class__.__name__
        for line in text:
            if "password authentication failed" in line or "does not exist" in line:
                msg = line
                break
        for line in text:  # libpq's own words for what the server said, when it got that far
            if "FATAL:" in line or "session is read-only" in line or "timeout expired" in line:
                msg = line.split("failed:", 1)[-1]
                break
        tried = dsn or _last_dsn
        where = f" (tried {targets(tried)})" if tried is not None else ""
        return f"cannot connect to PostgreSQL: {msg.strip()}{where}"
    return f"{exc.__class__.__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"


def connect(dsn: str, *, write: bool = False, **kwargs: object) -> psycopg.Connection:
    return psycopg.connect(session_dsn(dsn, write=write), **{**CONNECT_KWARGS, **kwargs})


async def aconnect(dsn: str, *, write: bool = True, **kwargs: object) -> psycopg.AsyncConnection:
    return await psycopg.AsyncConnection.connect(session_dsn(dsn, write=write), **{**CONNECT_KWARGS, **kwargs})


class StartupTimeout(RuntimeError):
    """CRONBOX_STARTUP_TIMEOUT passed without a writable database."""


async def wait_for_primary(dsn: str, *, timeout: float, what: str, stop: asyncio.Event | None = None) -> bool:
    """At start: wait until a writable primary answers, retrying with jittered exponential
    backoff (0.2 s up to 1 s) while the database is down, starting up, recovering or reachable
    only as a standby, and saying so in the log with the hosts tried. `timeout` 0 waits
    forever; otherwise StartupTimeout. Returns False when `stop` was set while waiting."""
    global _last_dsn
    _last_dsn = dsn
    started = time.monotonic()
    delay = 0.2
    attempt = 0
    while True:
        attempt += 1
        try:
            async with await aconnect(dsn) as conn:
                await conn.execute("SELECT 1")
            if attempt > 1:
                log.warning("database reachable, starting", extra={"fields": {
                    "process": what, "tried": targets(dsn), "waited_s": round(time.monotonic() - started, 1)}})
            return True
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            waited = time.monotonic() - started
            if timeout and waited >= timeout:
                raise StartupTimeout(
                    f"no writable PostgreSQL after {waited:.0f}s (CRONBOX_STARTUP_TIMEOUT): {explain(exc, dsn)}") from exc
            sleep = min(delay, timeout - waited) if timeout else delay
            log.warning("database not ready, waiting", extra={"fields": {
                "process": what, "tried": targets(dsn), "attempt": attempt, "retry_in_s": round(sleep, 2),
                "error": explain(exc, dsn)}})
            _count_db_error()
            if stop is not None:
                try:
                    await asyncio.wait_for(stop.wait(), sleep)
                    return False
                except TimeoutError:
                    pass
            else:
                await asyncio.sleep(sleep)
            delay = min(1.0, delay * 2) * random.uniform(0.8, 1.2)


RECENTLY_GOOD = 1.0  # seconds: Pool(trust_for=...) of the relay and the worker kit (their hot loops)

RECONNECT_FIRST = 0.1  # seconds: the pool's first reconnect delay after a failed attempt ...
RECONNECT_MAX = 0.5    # ... doubling up to this, so a server back after an outage is seen within it


class _PromptAttempt(AttemptWithBackoff):
    """psycopg_pool's reconnect backoff starts at 1 s and doubles without a cap (up to the
    reconnect timeout): after a 10 s outage the next attempt could come 5 s after the server
    is back. Here: from RECONNECT_FIRST doubling to RECONNECT_MAX (jittered)."""

    INITIAL_DELAY = RECONNECT_FIRST

    def update_delay(self, now: float) -> None:
        super().update_delay(now)
        if self.delay > RECONNECT_MAX:
            self.delay = min(RECONNECT_MAX * random.uniform(0.8, 1.0), max(0.0, self.give_up_at - now))


class Pool(AsyncConnectionPool):
    """The process's pool, made to recover promptly when the server comes back:

    - reconnect attempts (to refill the pool) back off from 0.1 s to 0.5 s, not 1 s doubling
      without a cap (psycopg_pool's default);
    - a connection that fails its check before use means the server went away (restart,
      failover), so every idle connection is from before: the pool drops them all at once
      (`drain()`) instead of finding them broken one by one with psycopg_pool's backoff
      between checks (1 s, 2 s, 4 s ...: up to a minute for a pool of seven);
    - with `trust_for` (seconds, 0: never), a connection whose last use ended well less than
      that long ago is handed out without the check (an empty query's round trip: at the
      relay's rate, a tenth of its own CPU); a statement that then finds the connection broken
      drops every idle connection at once, as a failed check does, and raises the connection
      error, which its caller retries as after any connection lost in use (`retrying`)."""

    def __init__(self, conninfo: str, *, trust_for: float = 0.0, **kwargs: object):
        self.trust_for = trust_for
        super().__init__(conninfo, check=self.check_and_drain, **kwargs)  # type: ignore[arg-type]

    # psycopg_pool 3.3's private hook (pinned <3.4 in pyproject): the one place a reconnect
    # attempt is created; later attempts carry this one's backoff state.
    async def _add_connection(self, attempt, growing: bool = False) -> None:  # type: ignore[override]
        await super()._add_connection(attempt or _PromptAttempt(timeout=self.reconnect_timeout), growing)

    async def _connect(self, timeout: float | None = None) -> psycopg.AsyncConnection:  # psycopg_pool 3.3's hook
        try:
            conn = await super()._connect(timeout)
        except psycopg.OperationalError as exc:
            if "session is read-only" in str(exc):  # libpq's read-write check refused the server
                _note_read_only()
            raise
        _note_writable()  # a connection that passed the read-write check
        return conn

    @contextlib.asynccontextmanager
    async def connection(self, timeout: float | None = None) -> AsyncIterator[psycopg.AsyncConnection]:
        """The pool's connection; a write refused as read-only closes it (the pool replaces
        it) and raises ServerReadOnly."""
        async with super().connection(timeout) as conn:
            try:
                yield conn
            except psycopg.errors.ReadOnlySqlTransaction as exc:
                _note_read_only()
                await conn.close()
                raise ServerReadOnly(f"{READ_ONLY}: {exc}") from exc
            except (psycopg.OperationalError, psycopg.InterfaceError):
                if self.trust_for and conn.broken:  # maybe handed out unchecked: the others are stale too
                    await self.drain()
                raise
            if self.trust_for:
                conn._cronbox_good_at = time.monotonic()  # type: ignore[attr-defined]

    async def check_and_drain(self, conn: psycopg.AsyncConnection) -> None:
        if self.trust_for and time.monotonic() - getattr(conn, "_cronbox_good_at", -math.inf) < self.trust_for:
            return
        try:
            await AsyncConnectionPool.check_connection(conn)
        except Exception:
            await self.drain()
            raise


async def open_pool(dsn: str, *, min_size: int = 1, max_size: int = 4, name: str = "cronbox",
                    trust_for: float = 0.0) -> AsyncConnectionPool:
    """Open the process's one pool explicitly; connections are checked before use (with
    `trust_for`, only those idle longer than that), go to a writable primary only, and each
    attempt is bounded by connect_timeout (see Pool for how it recovers after the server was
    away)."""
    global _last_dsn
    _last_dsn = dsn
    pool = Pool(
        session_dsn(dsn, write=True),
        trust_for=trust_for,
        min_size=min_size,
        max_size=max_size,
        kwargs=dict(CONNECT_KWARGS),
        name=name,
        open=False,
        reconnect_timeout=3600,
    )
    await pool.open(wait=True, timeout=30)
    return pool


def _count_db_error() -> None:
    from cronbox import metrics  # lazy: the CLI's one-shot commands do not need it

    metrics.observe_db_error()


def node_unreachable(exc: BaseException) -> bool:
    """Whether `exc` is a Citus worker node the coordinator could not reach for the statement:
    the coordinator reports it as the statement's error with a connection-failure SQLSTATE
    (class 08), the process's own connection alive (the process's own connection lost carries
    no SQLSTATE: psycopg raises it client-side), or, for a node lost within the statement's
    transaction, as an internal error (XX000) that only its message tells apart."""
    if not isinstance(exc, psycopg.Error):
        return False
    return (exc.sqlstate or "").startswith("08") or (
        exc.sqlstate == "XX000" and "failure on connection marked as essential" in str(exc))


async def retrying(op: Callable[[], Awaitable[T]], *, budget: float, what: str,
                   stop: asyncio.Event | None = None) -> T:
    """Run a whole transaction again on connection errors, bounded by time (they carry no
    SQLSTATE). With `stop`, give up (re-raising the last error) once it is set: a process
    asked to shut down while the database is away must not retry for the whole budget."""
    give_up = stop_after_delay(budget)
    if stop is not None:
        give_up = give_up | (lambda _state: stop.is_set())
    async for attempt in AsyncRetrying(
        # not a Citus worker node unreachable: the loops going bucket by bucket pass over its
        # buckets (cronbox.buckets.Unreached) rather than hold every other bucket here
        retry=retry_if_exception(lambda e: isinstance(e, (psycopg.OperationalError, psycopg.InterfaceError))
                                 and not node_unreachable(e)),
        # 0.1 s doubling to 1 s: a restarted or promoted server is used within ~1 s of accepting connections
        wait=wait_exponential_jitter(multiplier=0.1, max=1, jitter=0.2),
        stop=give_up,
        reraise=True,
        before_sleep=lambda rs: (_count_db_error(), log.warning(
            "%s failed, retrying", what, extra={"fields": {"attempt": rs.attempt_number, "error": explain(rs.outcome.exception())}}
        )),
    ):
        with attempt:
            return await op()
    raise AssertionError("unreachable")
