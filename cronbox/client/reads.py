"""Reading one schedule or one run, as dataclasses (the views cronbox.schedules and cronbox.runs).

A column the view gained after this client was written lands in `extra`, so an older client
keeps working against a newer schema; tests/test_client.py keeps the fields in step."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row

from cronbox.client.calls import Call, Op

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class ScheduleRecord:
    """A row of cronbox.schedules."""
    name: str
    kind: str
    expression: str
    cron_normalized: str | None
    timezone: str
    status: str
    paused: bool
    paused_reason: str | None
    paused_at: datetime | None
    paused_until: datetime | None
    next_fire: datetime | None
    pending: int
    last_fire_at: datetime | None
    last_run_state: str | None
    last_success_at: datetime | None
    consecutive_failures: int
    consecutive_crashes: int
    active_runs: int
    missed_count: int
    queue: str
    priority: int
    overlap: str
    on_error: str
    catchup: str
    catchup_window: timedelta
    jitter: timedelta
    starts_at: datetime | None
    ends_at: datetime | None
    finished_at: datetime | None
    owner: str | None
    job_id: int
    created_at: datetime
    updated_at: datetime
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """A row of cronbox.runs: one attempt of a run."""
    run_id: int
    job: str
    queue: str
    fire_at: datetime
    state: str
    attempt: int
    origin: str
    priority: int
    due_at: datetime | None
    dispatched_at: datetime | None
    delivered_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    duration: timedelta | None
    lag: timedelta | None
    lease_until: datetime | None
    worker: str | None
    cancel_requested: bool | None
    error: str | None
    result: Any
    retry_of: int | None
    late_report: Any
    idempotency_key: str
    payload: Any
    job_id: int
    missed_fires: int | None
    missed_last_at: datetime | None
    trouble: str | None
    needs: Any  # the pool units the run holds (taken at dispatch)
    waiting_for: str | None  # NULL for runs (cronbox.runs' waiting fires have no run_id)
    waiting_since: datetime | None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


def _record(cls: type[T], names: list[str], row: tuple[Any, ...] | None) -> T | None:
    if row is None:
        return None
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    values = dict(zip(names, row))
    extra = {k: v for k, v in values.items() if k not in known}
    fields = {k: v for k, v in values.items() if k in known and k != "extra"}
    return cls(**fields, extra=extra)  # type: ignore[call-arg]


@dataclasses.dataclass(frozen=True)
class _Read(Call[Any]):
    view: str = ""
    key: str = ""
    record: type = object

    def query(self) -> tuple[sql.Composed, list[Any]]:
        return (sql.SQL("SELECT * FROM cronbox.{} WHERE {} = %s").format(sql.Identifier(self.view),
                                                                         sql.Identifier(self.key)),
                [self.args[self.key]])

    def run(self, conn: psycopg.Connection[Any]) -> Any:
        query, params = self.query()
        with conn.cursor(row_factory=tuple_row) as cur:
            row = cur.execute(query, params).fetchone()
            return _record(self.record, [d.name for d in cur.description or []], row)

    async def arun(self, conn: psycopg.AsyncConnection[Any]) -> Any:
        query, params = self.query()
        async with conn.cursor(row_factory=tuple_row) as cur:
            row = await (await cur.execute(query, params)).fetchone()
            return _record(self.record, [d.name for d in cur.description or []], row)


def _no_shape(rows: list[tuple[Any, ...]]) -> None:
    return None


@Op
def get_schedule(name: str) -> Call[ScheduleRecord | None]:
    """The schedule of that name as cronbox.schedules shows it, or None (also when row
    security hides it from the connection's role)."""
    return _Read("get_schedule", {"name": name}, _no_shape, view="schedules", key="name", record=ScheduleRecord)


@Op
def get_run(run_id: int) -> Call[RunRecord | None]:
    """One run (one attempt) as cronbox.runs shows it, or None."""
    return _Read("get_run", {"run_id": run_id}, _no_shape, view="runs", key="run_id", record=RunRecord)
