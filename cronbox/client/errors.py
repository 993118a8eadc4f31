"""One exception class per SQLSTATE of the cronbox API (docs/sql.md, "SQLSTATEs")."""

from __future__ import annotations

import re

import psycopg


class CronboxError(Exception):
    """A cronbox function refused the call. `sqlstate`, `message` (PostgreSQL's primary
    message), `param` (the parameter the message starts with, when it names one), `detail`,
    `hint`; the psycopg error is the `__cause__`. The transaction is aborted, as after any
    failed statement: roll back (or to a savepoint) before the next call."""

    sqlstate: str | None = None

    def __init__(self, message: str, *, sqlstate: str | None = None, detail: str | None = None,
                 hint: str | None = None, function: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.sqlstate = sqlstate or type(self).sqlstate
        self.detail, self.hint, self.function = detail, hint, function
        m = re.match(r"([a-z_][a-z0-9_]*)(?:\[\d+\])?(?:, [a-z_]+)*: ", message)
        self.param = m.group(1) if m else None


class InvalidValue(CronboxError, ValueError):
    """22023: a value outside its bound, of the wrong shape, or one that would never fire."""
    sqlstate = "22023"


class MissingValue(CronboxError, ValueError):
    """22004: a NULL where a value is required."""
    sqlstate = "22004"


class NotFound(CronboxError, LookupError):
    """P0002: the named schedule, upstream job, calendar or run does not exist (or is not the
    caller's, under row security)."""
    sqlstate = "P0002"


class NotPermitted(CronboxError, PermissionError):
    """42501: the connection's role may not call this function (or act on this row)."""
    sqlstate = "42501"


class WrongState(CronboxError):
    """55000: the object is in the wrong state (cancel a finished run, drop a calendar in use...)."""
    sqlstate = "55000"


class QuotaExceeded(CronboxError):
    """53400: the owner's quota (schedules, fires per second, top priority) does not allow it."""
    sqlstate = "53400"


class UnknownParameter(CronboxError):
    """42883: the database's cronbox has no such function or parameter: it is older than this
    client (run `cronbox migrate`)."""
    sqlstate = "42883"


BY_SQLSTATE: dict[str, type[CronboxError]] = {
    cls.sqlstate: cls for cls in (InvalidValue, MissingValue, NotFound, NotPermitted, WrongState, QuotaExceeded, UnknownParameter)
    if cls.sqlstate}


def translate(exc: psycopg.Error, function: str) -> CronboxError | None:
    """The CronboxError for a database error with a SQLSTATE (None for connection errors)."""
    if exc.sqlstate is None:
        return None
    diag = exc.diag
    cls = BY_SQLSTATE.get(exc.sqlstate, CronboxError)
    return cls(diag.message_primary or str(exc), sqlstate=exc.sqlstate, detail=diag.message_detail,
               hint=diag.message_hint, function=function)
