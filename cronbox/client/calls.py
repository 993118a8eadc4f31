"""The admin calls. Each is declared once, as a function that builds the `Call` (what to send,
how to read the answer); `Op` turns it into the sync call (`client.schedule(conn, ...)`) and
the async one (`client.aio.schedule(aconn, ...)`). SQL_TYPES holds each parameter's SQL type,
sent as an explicit cast so strings, ints and None resolve to the one function they mean."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any, Generic, Literal, ParamSpec, TypeVar

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row
from psycopg.types.json import Jsonb
from psycopg.types.range import Range

from cronbox.client.errors import translate

P = ParamSpec("P")
R = TypeVar("R")
Duration = timedelta | str  # a timedelta, or PostgreSQL interval text ("30 seconds")

# The SQL parameters of each admin function, in order, with their types (checked against
# pg_proc by tests/test_client.py). Python names: "from" and "to" are from_ and to.
SQL_TYPES: dict[str, dict[str, str]] = {
    "schedule": {
        "name": "text", "cron": "text", "every": "interval", "at": "timestamptz", "payload": "jsonb",
        "queue": "text", "timezone": "text", "priority": "integer", "overlap": "text", "on_error": "text",
        "max_attempts": "integer", "retry_delay": "interval", "retry_max_delay": "interval",
        "timeout": "interval", "catchup": "text", "catchup_window": "interval", "jitter": "interval",
        "starts_at": "timestamptz", "ends_at": "timestamptz", "after": "text[]", "every_mode": "text",
        "reason": "text", "max_runs": "integer", "exclude": "text", "needs": "jsonb", "on_unavailable": "text",
        "unavailable_timeout": "interval", "notify": "text[]"},
    "unschedule": {"name": "text", "reason": "text"},
    "pause": {"name": "text", "reason": "text", "after_failure": "boolean", "until": "timestamptz"},
    "resume": {"name": "text", "reason": "text"},
    "trigger": {"name": "text", "payload": "jsonb", "reason": "text"},
    "backfill": {"name": "text", "from": "timestamptz", "to": "timestamptz", "overlap": "text", "priority": "integer"},
    "cancel": {"run_id": "bigint"},
    "preview": {"cron": "text", "every": "interval", "timezone": "text", "starts_at": "timestamptz", "n": "integer",
                "exclude": "text"},
    "next_fires": {"name": "text", "n": "integer"},
    "add_dependency": {"name": "text", "upstream": "text", "within": "interval", "wait_timeout": "interval",
                       "job": "text"},
    "remove_dependency": {"name": "text", "upstream": "text", "job": "text"},
    "create_calendar": {"name": "text", "dates": "date[]", "ranges": "daterange[]", "crons": "text[]",
                        "timezone": "text"},
    "drop_calendar": {"name": "text"},
    "set_queue_limit": {"queue": "text", "max_running": "integer"},
    "set_pool": {"name": "text", "capacity": "integer"},
    "redrive": {"id": "bigint", "queue": "text", "everything": "boolean"},
    "rerun": {"run_id": "bigint", "reason": "text"},
    "delete_dead_letter": {"id": "bigint"},
    "pause_schedules": {"queue": "text", "owner": "text", "name_like": "text", "reason": "text"},
    "resume_schedules": {"queue": "text", "owner": "text", "name_like": "text", "reason": "text"},
    "grant_queue": {"queue": "text", "role": "text", "kind": "text"},
    "revoke_queue": {"queue": "text", "role": "text", "kind": "text"},
    "set_quota": {"owner": "text", "max_schedules": "integer", "max_fires_per_second": "numeric",
                  "top_priority": "integer"},
}
PYTHON_NAMES = {"from": "from_", "to": "to"}
# SQL parameters deliberately not offered: add/remove_dependency's `name`, the older spelling of `job`.
NOT_OFFERED = {"add_dependency": {"name"}, "remove_dependency": {"name"}}


@dataclasses.dataclass(frozen=True)
class Job:
    """What schedule() made or updated."""
    job_id: int
    name: str


@dataclasses.dataclass(frozen=True)
class Triggered:
    """A manual fire: `future_id` of the fire trigger() decided in the same transaction
    (dispatched, skipped or held, as the poller would); its run shows in cronbox.runs."""
    future_id: int
    name: str


@dataclasses.dataclass(frozen=True)
class Backfill:
    """A backfill request (progress in cronbox.backfills)."""
    request_id: int
    name: str


@dataclasses.dataclass(frozen=True)
class Call(Generic[R]):
    function: str
    args: Mapping[str, Any]  # SQL name -> value, only those given
    shape: Callable[[list[tuple[Any, ...]]], R]
    set_returning: bool = False

    def query(self) -> tuple[sql.Composed, list[Any]]:
        types = SQL_TYPES[self.function]
        named = sql.SQL(", ").join(
            sql.SQL("{} => %s::{}").format(sql.Identifier(k), sql.SQL(types[k])) for k in self.args)
        form = "SELECT * FROM cronbox.{}({})" if self.set_returning else "SELECT cronbox.{}({})"
        return sql.SQL(form).format(sql.Identifier(self.function), named), list(self.args.values())

    def run(self, conn: psycopg.Connection[Any]) -> R:
        query, params = self.query()
        try:
            with conn.cursor(row_factory=tuple_row) as cur:
                rows = cur.execute(query, params).fetchall()
        except psycopg.Error as exc:
            raise (translate(exc, self.function) or exc) from exc
        return self.shape(rows)

    async def arun(self, conn: psycopg.AsyncConnection[Any]) -> R:
        query, params = self.query()
        try:
            async with conn.cursor(row_factory=tuple_row) as cur:
                rows = await (await cur.execute(query, params)).fetchall()
        except psycopg.Error as exc:
            raise (translate(exc, self.function) or exc) from exc
        return self.shape(rows)


class Op(Generic[P, R]):
    """A declared call: `op(conn, ...)` runs it on a psycopg Connection, `await op.aio(aconn,
    ...)` on an AsyncConnection."""

    def __init__(self, build: Callable[P, Call[R]]) -> None:
        self.build = build
        functools.update_wrapper(self, build)

    def __call__(self, conn: psycopg.Connection[Any], /, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.build(*args, **kwargs).run(conn)

    async def aio(self, conn: psycopg.AsyncConnection[Any], /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self.build(*args, **kwargs).arun(conn)


def _args(function: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The SQL arguments from a build function's locals(): None left out, values adapted."""
    out: dict[str, Any] = {}
    for name, sql_type in SQL_TYPES[function].items():
        value = given.get(PYTHON_NAMES.get(name, name))
        if value is not None:
            out[name] = _adapt(name, sql_type, value)
    return out


def _adapt(name: str, sql_type: str, value: Any) -> Any:
    if sql_type == "jsonb":
        return Jsonb(value)
    if sql_type == "timestamptz":
        if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
            raise TypeError(f"{name}: expected a timezone-aware datetime, got {value!r}")
    elif sql_type == "interval":
        if not isinstance(value, timedelta | str):
            raise TypeError(f"{name}: expected a timedelta or interval text, got {value!r}")
    elif sql_type.endswith("[]"):
        if isinstance(value, str | bytes) or not isinstance(value, Sequence):
            raise TypeError(f"{name}: expected a list, got {value!r}")
        if sql_type == "daterange[]":
            return [v if isinstance(v, Range) else Range(v[0], v[1], "[]") for v in value]
        return list(value)
    elif sql_type in ("integer", "bigint") and (isinstance(value, bool) or not isinstance(value, int)):
        raise TypeError(f"{name}: expected an int, got {value!r}")
    elif sql_type == "numeric" and (isinstance(value, bool) or not isinstance(value, int | float | Decimal)):
        raise TypeError(f"{name}: expected a number, got {value!r}")
    elif sql_type == "boolean" and not isinstance(value, bool):
        raise TypeError(f"{name}: expected a bool, got {value!r}")
    elif sql_type == "text" and not isinstance(value, str):
        raise TypeError(f"{name}: expected a str, got {value!r}")
    return value


def _one(rows: list[tuple[Any, ...]]) -> Any:
    return rows[0][0]


def _column(rows: list[tuple[Any, ...]]) -> list[Any]:
    return [r[0] for r in rows]


# --- schedules ---------------------------------------------------------------------------
@Op
def schedule(name: str, *, cron: str | None = None, every: Duration | None = None, at: datetime | None = None,
             payload: Any = None, queue: str | None = None, timezone: str | None = None,
             priority: int | None = None,
             overlap: Literal["skip", "buffer_one", "buffer_all", "allow", "cancel_other"] | None = None,
             on_error: Literal["retry_schedule", "retry_soon", "pause"] | None = None,
             max_attempts: int | None = None, retry_delay: Duration | None = None,
             retry_max_delay: Duration | None = None, timeout: Duration | None = None,
             catchup: Literal["skip", "latest", "all"] | None = None, catchup_window: Duration | None = None,
             jitter: Duration | None = None, starts_at: datetime | None = None, ends_at: datetime | None = None,
             after: Sequence[str] | None = None, every_mode: Literal["fixed_rate", "fixed_delay"] | None = None,
             reason: str | None = None, max_runs: int | None = None, exclude: str | None = None,
             needs: Mapping[str, int] | None = None,
             on_unavailable: Literal["wait", "retry", "fail"] | None = None,
             unavailable_timeout: Duration | None = None, notify: Sequence[str] | None = None) -> Call[Job]:
    """Create or update (same name: atomically) a schedule; exactly one of cron, every, at,
    after. Bounds and defaults: `\\df+ cronbox.schedule`, docs/schedules.md."""
    return Call("schedule", _args("schedule", locals()), lambda rows: Job(_one(rows), name))


@Op
def unschedule(name: str, *, reason: str | None = None) -> Call[bool]:
    """Remove a schedule and its pending fires (history stays); False if there was none."""
    return Call("unschedule", _args("unschedule", locals()), _one)


@Op
def pause(name: str, *, reason: str | None = None, after_failure: bool | None = None,
          until: datetime | None = None) -> Call[bool]:
    """Pause a schedule (until a time, or until resume()); False if already paused so."""
    return Call("pause", _args("pause", locals()), _one)


@Op
def resume(name: str, *, reason: str | None = None) -> Call[bool]:
    """Resume a paused schedule from now; False if it was not paused."""
    return Call("resume", _args("resume", locals()), _one)


@Op
def trigger(name: str, *, payload: Any = None, reason: str | None = None) -> Call[Triggered]:
    """Run a job now, outside its schedule (payload for this run only)."""
    return Call("trigger", _args("trigger", locals()), lambda rows: Triggered(_one(rows), name))


@Op
def backfill(name: str, from_: datetime, to: datetime, *,
             overlap: Literal["skip", "buffer_one", "buffer_all", "allow", "cancel_other"] | None = None,
             priority: int | None = None) -> Call[Backfill]:
    """Fire each scheduled time of a job from `from_` to `to` (both included)."""
    return Call("backfill", _args("backfill", locals()), lambda rows: Backfill(_one(rows), name))


@Op
def preview(*, cron: str | None = None, every: Duration | None = None, timezone: str | None = None,
            starts_at: datetime | None = None, n: int | None = None, exclude: str | None = None) -> Call[list[datetime]]:
    """The next fire times of an expression, exactly as the poller computes them."""
    return Call("preview", _args("preview", locals()), _column, set_returning=True)


@Op
def next_fires(name: str, n: int | None = None) -> Call[list[datetime]]:
    """The next fire times of a schedule."""
    return Call("next_fires", _args("next_fires", locals()), _column, set_returning=True)


@Op
def add_dependency(job: str, upstream: str, *, within: Duration | None = None,
                   wait_timeout: Duration | None = None) -> Call[None]:
    """Gate `job`'s runs on a recent success of `upstream` (cycles are refused)."""
    return Call("add_dependency", _args("add_dependency", locals()), lambda rows: None)


@Op
def remove_dependency(job: str, upstream: str) -> Call[bool]:
    """Remove a dependency; False if there was none."""
    return Call("remove_dependency", _args("remove_dependency", locals()), _one)


@Op
def create_calendar(name: str, *, dates: Sequence[date] | None = None,
                    ranges: Sequence[Range[date] | tuple[date, date]] | None = None,
                    crons: Sequence[str] | None = None, timezone: str | None = None) -> Call[int]:
    """Create (or replace the contents of) an exclusion calendar; returns its id. A (first,
    last) tuple in `ranges` includes both days."""
    return Call("create_calendar", _args("create_calendar", locals()), _one)


@Op
def drop_calendar(name: str) -> Call[bool]:
    """Drop an exclusion calendar no schedule uses; False if there was none."""
    return Call("drop_calendar", _args("drop_calendar", locals()), _one)


# --- runs and queues ---------------------------------------------------------------------
@Op
def cancel(run_id: int) -> Call[Literal["cancelled", "cancel_requested"]]:
    """Cancel a run: at once while it waits in the outbox, else its worker is told."""
    return Call("cancel", _args("cancel", locals()), _one)


@Op
def set_queue_limit(queue: str, max_running: int | None) -> Call[int | None]:
    """Cap a queue's unfinished runs; returns its unfinished runs now. None removes the cap
    (and returns None)."""
    call = Call("set_queue_limit", _args("set_queue_limit", locals()), _one)
    if max_running is None:  # NULL is meaningful here: send it
        call = dataclasses.replace(call, args={**call.args, "max_running": None})
    return call


@Op
def set_pool(name: str, capacity: int | None) -> Call[int | None]:
    """Create a resource pool or set its capacity in units; returns the units in use now. None
    removes the pool (refused while a schedule needs it) and returns None."""
    call = Call("set_pool", _args("set_pool", locals()), _one)
    if capacity is None:  # NULL is meaningful here: send it
        call = dataclasses.replace(call, args={**call.args, "capacity": None})
    return call


@Op
def redrive(*, id: int | None = None, queue: str | None = None, everything: bool | None = None) -> Call[int]:
    """Put dead letters back into the outbox: one by id, a queue's, or everything=True."""
    return Call("redrive", _args("redrive", locals()), _one)


# --- many schedules at once, tenants ------------------------------------------------------
@Op
def pause_schedules(*, queue: str | None = None, owner: str | None = None, name_like: str | None = None,
                    reason: str | None = None) -> Call[int]:
    """Pause every schedule you may change that matches all the filters given (at least one);
    returns how many were paused."""
    return Call("pause_schedules", _args("pause_schedules", locals()), _one)


@Op
def resume_schedules(*, queue: str | None = None, owner: str | None = None, name_like: str | None = None,
                     reason: str | None = None) -> Call[int]:
    """Resume every paused schedule you may change that matches all the filters given."""
    return Call("resume_schedules", _args("resume_schedules", locals()), _one)


@Op
def grant_queue(queue: str, role: str, *, kind: Literal["owner", "worker"] | None = None) -> Call[bool]:
    """Administrators: grant a queue to a role (kind owner: may schedule onto it; worker: may
    work it); False if granted already."""
    return Call("grant_queue", _args("grant_queue", locals()), _one)


@Op
def revoke_queue(queue: str, role: str, *, kind: Literal["owner", "worker"] | None = None) -> Call[bool]:
    """Administrators: take back a queue grant; False if there was none."""
    return Call("revoke_queue", _args("revoke_queue", locals()), _one)


@Op
def set_quota(owner: str, *, max_schedules: int | None = None, max_fires_per_second: float | None = None,
              top_priority: int | None = None) -> Call[int]:
    """Administrators: an owner role's quota (all None removes it); returns its schedules."""
    return Call("set_quota", _args("set_quota", locals()), _one)


@Op
def rerun(run_id: int, *, reason: str | None = None) -> Call[int | None]:
    """Run a finished run again (same job, fire time and payload; origin rerun); the new run's
    id, None while it is held."""
    return Call("rerun", _args("rerun", locals()), _one)


@Op
def delete_dead_letter(id: int) -> Call[bool]:  # noqa: A002  (the SQL parameter's name)
    """Discard one dead letter for good (redrive puts one back instead)."""
    return Call("delete_dead_letter", _args("delete_dead_letter", locals()), _one)


OPS: dict[str, Op[Any, Any]] = {name: op for name, op in list(globals().items()) if isinstance(op, Op)}
