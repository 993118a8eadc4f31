"""Thin wrappers over the poller's SQL functions: one statement, one round trip each (the
relay's counterpart is relay/store.py). The loops (poller/tick.py, saturate.py,
maintenance.py, quarantine.py, metrics.py) hold no SQL of their own.

Each takes the connection (the caller owns the transaction: a saturation pass, a dispatch
batch isolating a failing job, a savepoint per quarantine).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import psycopg
from psycopg.rows import RowMaker, dict_row, no_result

# The sleep until the next due time, computed where the timestamps are and clamped to a day:
# a future due at 'infinity' (written before inputs were bounded) must not break the tick.
_WAIT = ("CASE WHEN next_due IS NULL THEN NULL ELSE extract(epoch FROM least(greatest(next_due, "
         "clock_timestamp() - interval '1 day'), clock_timestamp() + interval '1 day') - clock_timestamp()) END")
# And whether that fire was due when the transaction started (now()) yet not taken: its job was
# locked elsewhere (try again soon). One that came due while the statement ran is taken at once.
_DUE = _WAIT + ", coalesce(next_due <= now(), false)"
_DISPATCH = "SELECT dispatched, skipped, failed, held, " + _DUE + " FROM cronbox.dispatch(%s, %s, %s, %s)"
_DISPATCH_AHEAD = ("SELECT dispatched, busy, " + _DUE + ", walked_to, walked_id "
                   "FROM cronbox.dispatch_ahead(%s, %s, %s, p_walked_to => %s, p_walked_id => %s)")

# dispatched, skipped, failed, held, seconds to next due, next due left behind (its job busy)
Dispatched = tuple[int, int, int, int, "float | None", bool]


async def dispatch(conn: psycopg.AsyncConnection, limit: int, jobs: Sequence[int] | None,
                   grace: timedelta, bucket: int | None = None) -> Dispatched:
    """One dispatch batch (cronbox.dispatch); `jobs` restricts it to those jobs (isolation),
    `bucket` to that bucket's futures (None: every bucket)."""
    cur = await conn.execute(_DISPATCH, (limit, None if jobs is None else list(jobs), grace, bucket))
    return await cur.fetchone()


# Where early dispatch's walk may resume: (walked_to, walked_id) as the last call returned them.
Walked = tuple[datetime, int]


async def dispatch_ahead(conn: psycopg.AsyncConnection, limit: int, lead: timedelta,
                         walked: Walked | None = None,
                         bucket: int | None = None) -> tuple[int, int, float | None, bool, Walked | None]:
    """Early dispatch of fires due within `lead` (of `bucket` only, when given), resuming the
    walk at `walked` (None: the whole lead; a cursor is the bucket's it came from): (dispatched,
    busy, seconds to next due, next due left behind, where the next call may resume: None
    unless this one examined everything within the lead)."""
    cur = await conn.execute(_DISPATCH_AHEAD, (limit, lead, bucket, *(walked or (None, None))))
    dispatched, busy, wait, behind, walked_to, walked_id = await cur.fetchone()
    return dispatched, busy, wait, behind, (None if walked_to is None else (walked_to, walked_id))


async def due_ahead(conn: psycopg.AsyncConnection, within: timedelta, limit: int,
                    bucket: int | None = None) -> list[tuple[int, int]]:
    """(second from now, ready fires due in it) for the next `within`, at most `limit` counted, of
    `bucket`'s futures only when given (None: every bucket)."""
    cur = await conn.execute("SELECT second, fires FROM cronbox.due_ahead(%s, %s, %s)", (within, limit, bucket))
    return [(int(r[0]), int(r[1])) for r in await cur.fetchall()]


async def due_jobs(conn: psycopg.AsyncConnection, limit: int, bucket: int | None = None) -> list[int]:
    """The jobs a dispatch batch of `limit` would take (to bisect a failing batch), of `bucket`
    only when given (None: every bucket)."""
    cur = await conn.execute("SELECT cronbox.due_jobs(%s, %s)", (limit, bucket))
    return [r[0] for r in await cur.fetchall()]


class Job(NamedTuple):
    """A row of cronbox.claim_saturation: a job to saturate, as poller/plan.py reads it."""
    job_id: int
    kind: str
    cron_normalized: str | None
    every: timedelta | None
    every_mode: str | None
    anchor: datetime | None
    at: datetime | None
    timezone: str | None
    frontier: datetime | None
    catchup: str
    catchup_window: timedelta | None
    starts_at: datetime | None
    ends_at: datetime | None
    now: datetime            # the database's clock (claim_saturation's, not the poller's)
    catchup_from: datetime | None  # now - catchup_window, computed by the database
    bucket: int


def job_row(cursor: psycopg.AsyncCursor[Any]) -> RowMaker[Job]:
    """The claimed rows as Jobs (tuples: a dict per row cost the poller ~2 us of its ~13 us a
    job at 200,000 schedules); the columns are checked once per result, not per row."""
    if cursor.description is None:  # psycopg asks before there is a result too
        return no_result
    names = tuple(c.name for c in cursor.description)
    if names != Job._fields:
        raise RuntimeError(f"cronbox.claim_saturation returned columns {names}, the poller reads {Job._fields}")
    return Job._make


async def claim_saturation(cur: psycopg.AsyncCursor[Any], limit: int, horizon: timedelta,
                           now: datetime | None = None, bucket: int | None = None) -> None:
    """Lock a batch of jobs to saturate, of `bucket` only when given (None: every bucket); the
    rows stay on `cur` (a cursor with row_factory=job_row; read one by one where a row psycopg
    cannot load is reported by job id).
    `now` (tests only) calls the internal _at function, which only the owner or a superuser
    may execute."""
    if now is None:
        await cur.execute("SELECT * FROM cronbox.claim_saturation(%s, %s, %s)", (limit, horizon, bucket))
    else:
        await cur.execute("SELECT * FROM cronbox.claim_saturation_at(%s, %s, %s, p_now => %s)",
                          (limit, horizon, bucket, now))


async def relock_saturation(conn: psycopg.AsyncConnection, jobs: Sequence[int],
                            bucket: int | None = None) -> list[dict[str, Any]]:
    """Lock again (SKIP LOCKED) jobs a pass computed without their locks, in their `bucket`
    (None: every bucket in turn): their rows as claim_saturation returned them (without its
    clock columns), for those taken."""
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute("SELECT * FROM cronbox.relock_saturation(%s::bigint[], %s)", (list(jobs), bucket))
    return await cur.fetchall()


_STORE_TYPES = ("bigint[]", "timestamptz[]", "boolean[]", "bigint[]", "timestamptz[]", "timestamptz[]",
                "boolean[]", "text[]", "timestamptz[]", "bigint[]", "boolean[]")


async def store_fires(conn: psycopg.AsyncConnection, args: list[Any], now: datetime | None = None,
                      bucket: int | None = None) -> tuple[int, int]:
    """Write a saturation plan (the parallel arrays of poller.plan.Plan) of jobs in `bucket`
    (None: any): (futures, missed). The arrays travel in binary (a timestamp array as text
    costs the poller ~20 us per element)."""
    params = ", ".join(f"%b::{t}" for t in _STORE_TYPES[:len(args)])
    args = [*args, bucket]
    if now is None:
        query = "SELECT futures, missed FROM cronbox.store_fires(" + params + ", p_bucket => %s::integer)"
    else:  # tests: the internal body with the chosen clock
        args = [*args, now]
        query = "SELECT futures, missed FROM cronbox.store_fires_at(" + params + ", p_bucket => %s::integer, p_now => %s)"
    row = await (await conn.execute(query, args)).fetchone()
    return row[0], row[1]


async def database_now(conn: psycopg.AsyncConnection, now: datetime | None = None) -> datetime:
    return (await (await conn.execute("SELECT coalesce(%s::timestamptz, now())", (now,))).fetchone())[0]


async def quarantine_job(conn: psycopg.AsyncConnection, job_id: int, error: str, bucket: int | None = None) -> bool:
    """Pause a job the poller cannot process (True if it was paused now); `bucket`: the job's
    (None: looked up)."""
    cur = await conn.execute("SELECT cronbox.quarantine_job(%s, %s, %s)", (job_id, error, bucket))
    row = await cur.fetchone()
    return bool(row and row[0])


async def reap_lost(conn: psycopg.AsyncConnection, limit: int, bucket: int | None = None) -> int:
    cur = await conn.execute("SELECT cronbox.reap_lost(%s, %s)", (limit, bucket))
    return (await cur.fetchone())[0]


async def release_holds(conn: psycopg.AsyncConnection, limit: int, bucket: int | None = None) -> int:
    cur = await conn.execute("SELECT cronbox.release_holds(%s, %s)", (limit, bucket))
    return (await cur.fetchone())[0]


async def resume_paused(conn: psycopg.AsyncConnection, limit: int, now: datetime | None = None,
                        bucket: int | None = None) -> int:
    """End pauses whose until has passed (pause(..., until => ...)), of `bucket`'s jobs only when
    given (None: every bucket): the number of jobs resumed."""
    if now is None:
        cur = await conn.execute("SELECT cronbox.resume_paused(%s, %s)", (limit, bucket))
    else:  # tests: the internal body with the chosen clock
        cur = await conn.execute("SELECT cronbox.resume_paused_at(%s, %s, %s)", (limit, bucket, now))
    return (await cur.fetchone())[0]


async def claim_backfills(cur: psycopg.AsyncCursor[Any], limit: int, now: datetime | None = None,
                          bucket: int | None = None) -> None:
    """Lock pending backfill requests and their jobs (of `bucket` only when given); the rows, each
    with its bucket, stay on `cur`."""
    if now is None:
        await cur.execute("SELECT * FROM cronbox.claim_backfills(%s, %s)", (limit, bucket))
    else:
        await cur.execute("SELECT * FROM cronbox.claim_backfills_at(%s, %s, %s)", (limit, bucket, now))


async def store_backfill(conn: psycopg.AsyncConnection, args: list[Any], now: datetime | None = None,
                         bucket: int | None = None) -> tuple[int, int]:
    """Write a backfill pass of `bucket`'s requests (poller.backfill; None: every bucket):
    (futures, duplicates)."""
    args = [*args, bucket]
    if now is None:
        query = "SELECT futures, duplicates FROM cronbox.store_backfill(%s, %s, %s, %s, %s, %s, %s)"
    else:
        args = [*args, now]
        query = "SELECT futures, duplicates FROM cronbox.store_backfill_at(%s, %s, %s, %s, %s, %s, %s, %s)"
    row = await (await conn.execute(query, args)).fetchone()
    return row[0], row[1]


async def ensure_run_partitions(conn: psycopg.AsyncConnection, days_ahead: int) -> None:
    await conn.execute("SELECT cronbox.ensure_run_partitions(%s)", (days_ahead,))


async def drop_run_partitions(conn: psycopg.AsyncConnection, retention: timedelta) -> list[str]:
    cur = await conn.execute("SELECT * FROM cronbox.drop_run_partitions(%s)", (retention,))
    return [r[0] for r in await cur.fetchall()]


async def reconcile_queue_limits(conn: psycopg.AsyncConnection) -> None:
    await conn.execute("SELECT cronbox.reconcile_queue_limits()")


async def reconcile_pools(conn: psycopg.AsyncConnection) -> None:
    await conn.execute("SELECT cronbox.reconcile_pools()")


async def sync_schedule_names(conn: psycopg.AsyncConnection, batch: int) -> int:
    """Adds up to `batch` new schedules to the web console's name-search side table; returns
    how many (`batch`: call again, more are waiting)."""
    cur = await conn.execute("SELECT cronbox.sync_schedule_names(%s)", (batch,))
    return (await cur.fetchone())[0]


async def fold_job_stats(conn: psycopg.AsyncConnection, batch: int, bucket: int | None = None) -> int:
    """Folds the job statistics left off the hot path into cronbox.job_stat, of one bucket (None:
    every bucket); returns the change rows folded (0 also when another poller is folding them)."""
    cur = await conn.execute("SELECT cronbox.fold_job_stats(%s, %s)", (batch, bucket))
    return (await cur.fetchone())[0]


async def tally_runs(conn: psycopg.AsyncConnection, batch: int) -> int:
    """Counts finished runs per minute for the console's overview; returns the rows read."""
    cur = await conn.execute("SELECT cronbox.tally_runs(%s)", (batch,))
    return (await cur.fetchone())[0]


async def run_id_before(conn: psycopg.AsyncConnection, settle: float) -> int:
    """The first run id drawn `settle` seconds ago (runs below it have committed)."""
    cur = await conn.execute("SELECT cronbox.run_id_at(now() - make_interval(secs => %s))", (settle,))
    return (await cur.fetchone())[0]


async def metrics_runs(conn: psycopg.AsyncConnection, after: int, before: int,
                       bounds: Sequence[float]) -> list[tuple[str, str, int | None, int, float]]:
    """Runs with after < run_id < before: (queue, outcome, lag bucket, runs, lag sum)."""
    cur = await conn.execute("SELECT queue, outcome, bucket, runs, lag_sum FROM cronbox.metrics_runs(%s, %s, %s)",
                             (after, before, list(bounds)))
    return list(await cur.fetchall())
