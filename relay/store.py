"""Thin wrappers over the relay's SQL functions: one statement, one round trip each."""

from __future__ import annotations

import time
from datetime import timedelta

import psycopg

from cronbox import db
from relay.message import Columns, bodies, renders_times
from relay.routes import OWN_ROUTE_QUEUES, Routes
from relay.settings import RelaySettings
from relay.sinks import Report, Row

# The times as float8 seconds by date_part, not extract(...)::float8: extract computes a numeric
# first, and four of them per row cost the server about as much as the row's message.
# With p_parts a run's message comes as its parts (message NULL), written here (relay/message.py).
_CLAIM = (
    "SELECT outbox_id, queue, coalesce(idempotency_key, 'outbox:' || outbox_id), message::text, "
    "date_part('epoch', clock_timestamp() - fire_at), "
    "date_part('epoch', available_at - statement_timestamp()), "
    "date_part('epoch', clock_timestamp() - statement_timestamp()), "
    "date_part('epoch', statement_timestamp()), attempts, bucket, "
    "job, payload, attempt, date_part('epoch', fire_at), date_part('epoch', deadline) "
    "FROM cronbox.claim_outbox(%s, %s, %s, %s, %s, p_ahead => %s, p_bucket => %s, p_parts => %s)"
)
_PARTS = Columns(message=3, run_id=0, job=10, queue=1, payload=11, fire_at=13, attempt=12, deadline=14, key=2)
_CLOCK = "SELECT extract(epoch FROM clock_timestamp())::float8"


async def retrying(op, *, budget: float, what: str):
    """db.retrying, without building a tenacity loop per call on the happy path."""
    try:
        return await op()
    except (psycopg.OperationalError, psycopg.InterfaceError):
        return await db.retrying(op, budget=budget, what=what)


async def claim_outbox(pool, owner: str, limit: int, lease: timedelta,
                       include: list[str] | None, exclude: list[str] | None,
                       ahead: timedelta = timedelta(0), bucket: int | None = None) -> list[Row]:
    """Claim a batch, from `bucket` only when given (NULL: every bucket); with `ahead`, also
    rows due within it. Each row carries the monotonic
    time (this process's clock) before which it must not be sent, 0.0 if due, and its due time
    on the database's clock (epoch seconds, 0.0 if due).

    The due time is the database's; it is carried over to this clock without trusting the two
    clocks to agree: a database clock reading `db` taken before this process's monotonic
    `received` gives an offset `received - db` that is never less than the true one, so
    `due + offset` is never before the due time, and after it by no more than the time from
    that reading to `received`. Two readings, the smaller offset wins: the claim's own last row
    (which waited for the claim's commit and its whole result), and, when rows were claimed
    ahead, a bare `clock_timestamp()` round trip right after (writes nothing, commits nothing:
    a fraction of a millisecond), so rows go out within about that of their due time."""
    async with pool.connection() as conn:
        # binary results: the server sends the floats without writing them as text, the client
        # reads them without parsing (0.4 µs a row less, both sides, timed alone); the same values
        parts = renders_times(conn.info.parameter_status("TimeZone"))
        cur = await conn.execute(_CLAIM, (owner, limit, lease, include, exclude, ahead, bucket, parts), binary=True)
        raw = await cur.fetchall()
        received = time.monotonic()
        body = bodies(raw, _PARTS)
        make = Row._make  # tuple.__new__ on a tuple: not the generated Row.__new__, a Python call per row
        if not raw or max(r[5] for r in raw) <= 0:
            return [make((r[0], r[1], r[2], b, r[4], 0.0, 0.0, r[8], r[9])) for r, b in zip(raw, body)]
        offset = received - (raw[0][7] + max(r[6] for r in raw))
        try:  # the rows are claimed: a failed reading must not lose them (the claim's own serves)
            cur = await conn.execute(_CLOCK)
            (db_now,) = await cur.fetchone()
            offset = min(offset, time.monotonic() - db_now)
        except psycopg.Error:
            pass
    return [make((r[0], r[1], r[2], b, r[4], r[7] + r[5] + offset, r[7] + r[5], r[8], r[9])) if r[5] > 0
            else make((r[0], r[1], r[2], b, r[4], 0.0, 0.0, r[8], r[9])) for r, b in zip(raw, body)]


async def next_claim_at_due(pool, ahead: timedelta, bucket: int | None = None) -> float | None:
    """Seconds until the first row claimable only from its due time (an early 'skip' run)
    within `ahead` is due, on the database's clock; None when none was found."""
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT extract(epoch FROM cronbox.next_claim_at_due(%s, %s))::float8",
                                 (ahead, bucket))
        row = await cur.fetchone()
    return row[0] if row else None


ALL_SUCCEEDED = db.Jsonb({"state": "succeeded"})  # ack_outbox: the answer of every run acked


def ack_outcomes(report: Report) -> db.Jsonb | None:
    """The workers' answers as the ack takes them: when every row acked has one and each is a
    plain success (no result), the one answer for all, {"state": "succeeded"}, so the database
    reads, indexes and matches no answer per row; else the answers, one per row."""
    outcomes = report.outcomes
    if not outcomes:
        return None
    if len(outcomes) == len(report.ok) and all(len(oc) == 2 and oc["state"] == "succeeded" for oc in outcomes):
        return ALL_SUCCEEDED
    return db.Jsonb(outcomes)


def id_array(ids: list[int]) -> str:
    """Outbox ids as the text of a bigint[] (cast in the statement): one join in C, where psycopg
    dumps a list element by element in Python (a tenth of the relay's CPU at 20,000 runs/s)."""
    return "{" + ",".join(map(str, ids)) + "}"


async def ack_outbox(pool, owner: str, report: Report) -> int:
    outcomes = ack_outcomes(report)
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT cronbox.ack_outbox(%s, %s::bigint[], %s, %s)",
                                 (owner, id_array(report.ok), outcomes, report.bucket))
        row = await cur.fetchone()
    return int(row[0]) if row else 0


async def nack_outbox(pool, owner: str, report: Report, s: RelaySettings) -> tuple[int, list[int]]:
    """Backoff or dead-letter the failed rows: (retried count, dead-lettered outbox ids)."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT retried, dead_ids FROM cronbox.nack_outbox(%s, %s, %s, %s, %s::float8[], %s, %s, %s, %s)",
            (owner, report.failed, report.errors, report.retryable, report.retry_after, s.max_attempts,
             timedelta(seconds=s.backoff), timedelta(seconds=s.backoff_max), report.bucket))
        row = await cur.fetchone()
    return (int(row[0]), list(row[1])) if row else (0, [])


async def nack_outbox_unsent(pool, owner: str, ids: list[int], lease: timedelta, bucket: int | None = None) -> int:
    """Hand back rows that were never sent: back in their place in the claim order, attempt
    taken back."""
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT cronbox.nack_outbox_unsent(%s, %s, %s, %s)", (owner, ids, lease, bucket))
        row = await cur.fetchone()
    return int(row[0]) if row else 0


async def release_outbox(pool, owner: str, ids: list[int] | None = None, lease: timedelta | None = None,
                         bucket: int | None = None) -> int:
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT cronbox.release_outbox(%s, %s, p_lease => %s, p_bucket => %s)",
                                 (owner, ids, lease, bucket))
        row = await cur.fetchone()
    return int(row[0]) if row else 0


async def max_result_bytes(pool) -> int:
    """The database's cronbox.max_result_bytes setting, clamped as cronbox.max_result_bytes()
    clamps it (1 KiB .. 16 MiB, default 1 MiB): how much of a worker's answer the relay reads.
    The ack enforces the bound itself; this only keeps the relay from reading more."""
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT current_setting('cronbox.max_result_bytes', true)")
        row = await cur.fetchone()
    value = (row[0] or "") if row else ""
    if not value.isdigit() or len(value) > 9:
        return 1048576
    return min(max(int(value), 1024), 16777216)


async def named_by_other_relays(pool, owner: str, queues: list[str]) -> set[str]:
    """Those of `queues` that a live relay other than `owner` names in its routes (the
    registry's info.routes, cronbox.processes)."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT DISTINCT q.name FROM cronbox.processes p "
            "CROSS JOIN LATERAL jsonb_array_elements_text(CASE WHEN jsonb_typeof(p.info -> 'routes') = 'array' "
            "THEN p.info -> 'routes' ELSE '[]' END) AS q(name) "
            "WHERE p.kind = 'relay' AND p.live AND p.name <> %s AND q.name = ANY (%s)", (owner, queues))
        return {r[0] for r in await cur.fetchall()}


async def known_queues(pool, bucket: int | None = None) -> list[str]:
    """Queues in use: those of the jobs and of the messages waiting in the outbox (of `bucket`
    only when given; None: every bucket in one call)."""
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT queue FROM cronbox.list_queues(%s)", (bucket,))
        return [r[0] for r in await cur.fetchall()]


async def unrouted_in_outbox(pool, routes: Routes, bucket: int | None = None) -> list[tuple[str, int]]:
    """(queue, messages) waiting in the outbox for a queue with no route at all (of `bucket`
    only when given; None: every bucket in one call)."""
    if routes.default is not None:
        return []
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT queue, waiting FROM cronbox.list_queues(%s) WHERE waiting > 0 AND queue <> ALL (%s)",
            (bucket, [*routes.by_queue, *OWN_ROUTE_QUEUES]))
        return [(r[0], int(r[1])) for r in await cur.fetchall()]


async def every_bucket(pool) -> list[int]:
    """The buckets of the job (a database with the Citus layer: cronbox.buckets), in order."""
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT bucket FROM cronbox.buckets ORDER BY bucket_index")
        return [r[0] for r in await cur.fetchall()]
