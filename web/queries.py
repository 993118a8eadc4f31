"""The console's SQL: reads go through cronbox's views (row-level security applies to the
role of the request), actions through the public functions. Lists are keyset-paginated."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from psycopg import AsyncConnection, sql

PAGE = 50
RECENT = 100  # runs per schedule that success rate and duration percentiles look at
STRIP = 30  # of those, the latest shown as a strip of states in the schedules list
TROUBLE = ("failed", "lost", "cancelled", "skipped", "missed")
UNFINISHED = ("dispatched", "delivered", "running")
STATES = (*UNFINISHED, "succeeded", *TROUBLE)

Row = dict[str, Any]


async def rows(conn: AsyncConnection, query: Any, params: Any = None) -> list[Row]:
    cur = await conn.execute(query, params)
    return await cur.fetchall()  # type: ignore[return-value]


async def one(conn: AsyncConnection, query: Any, params: Any = None) -> Row | None:
    cur = await conn.execute(query, params)
    return await cur.fetchone()  # type: ignore[return-value]


async def abilities(conn: AsyncConnection) -> Row:
    """What the request's role may do: the buttons shown follow the database's grants."""
    row = await one(conn, """
        SELECT current_user AS role,
               EXISTS (SELECT 1 FROM pg_catalog.pg_proc p
                       WHERE p.pronamespace = 'cronbox'::regnamespace AND p.proname = 'pause'
                         AND pg_catalog.has_function_privilege(p.oid, 'EXECUTE')) AS manage,
               EXISTS (SELECT 1 FROM pg_catalog.pg_proc p
                       WHERE p.pronamespace = 'cronbox'::regnamespace AND p.proname = 'redrive'
                         AND pg_catalog.has_function_privilege(p.oid, 'EXECUTE')) AS redrive,
               EXISTS (SELECT 1 FROM pg_catalog.pg_proc p
                       WHERE p.pronamespace = 'cronbox'::regnamespace AND p.proname = 'next_fires'
                         AND pg_catalog.has_function_privilege(p.oid, 'EXECUTE')) AS next_fires,
               EXISTS (SELECT 1 FROM pg_catalog.pg_proc p
                       WHERE p.pronamespace = 'cronbox'::regnamespace AND p.proname = 'rerun'
                         AND pg_catalog.has_function_privilege(p.oid, 'EXECUTE')) AS rerun,
               EXISTS (SELECT 1 FROM pg_catalog.pg_proc p
                       WHERE p.pronamespace = 'cronbox'::regnamespace AND p.proname = 'delete_dead_letter'
                         AND pg_catalog.has_function_privilege(p.oid, 'EXECUTE')) AS delete_dead_letter,
               now() AS now,
               pg_catalog.has_table_privilege('cronbox.queues', 'SELECT') AS see_queues,
               pg_catalog.has_table_privilege('cronbox.processes', 'SELECT') AS see_processes,
               pg_catalog.has_table_privilege('cronbox.dead_letters', 'SELECT') AS see_dead_letters,
               pg_catalog.has_table_privilege('cronbox.pools', 'SELECT') AS see_pools,
               cronbox.caller_reads_all() AS reads_all""")
    assert row is not None
    return row


# -- overview -----------------------------------------------------------------------------

async def queues(conn: AsyncConnection) -> list[Row]:
    return await rows(conn, "SELECT * FROM cronbox.queues ORDER BY queue")


async def processes(conn: AsyncConnection) -> list[Row]:
    return await rows(conn, """
        SELECT kind, name, host, pid, version, started_at, last_seen, live, uptime, info
        FROM cronbox.processes ORDER BY live DESC, kind, name LIMIT 200""")


async def pools(conn: AsyncConnection) -> list[Row]:
    return await rows(conn, """
        SELECT name, capacity, in_use, free, waiting, oldest_wait, updated_at, updated_by
        FROM cronbox.pools ORDER BY name LIMIT 500""")


async def pool_users(conn: AsyncConnection, limit: int = 1000) -> dict[str, list[Row]]:
    """Per pool, the jobs holding its units (runs in flight: what each run took at dispatch)
    and those with fires waiting for them (the units the job needs), most units first. Reads
    the unfinished runs (cronbox.unfinished_runs(), then each by primary key) and the fires held
    for pools: what is in flight and waiting, never history."""
    found = await rows(conn, """
        WITH running AS (
            SELECT e.key AS pool, r.job_id, min(r.job) AS job, count(*) AS running,
                   sum(e.value::numeric) AS held, max(e.value::numeric) AS units
            FROM cronbox.unfinished_runs() u
            JOIN cronbox.runs r ON r.run_id = u.run_id
            CROSS JOIN LATERAL pg_catalog.jsonb_each_text(r.needs) e
            WHERE r.needs IS NOT NULL
            GROUP BY 1, 2
        ), waiting AS (
            SELECT substr(w.waiting_for, 6) AS pool, w.job_id, min(w.job) AS job, count(*) AS waiting,
                   max((w.needs ->> substr(w.waiting_for, 6))::numeric) AS units
            FROM cronbox.runs w
            WHERE w.state = 'waiting' AND w.waiting_for LIKE 'pool %%'
            GROUP BY 1, 2
        )
        SELECT coalesce(r.pool, w.pool) AS pool, coalesce(r.job, w.job) AS job, coalesce(r.units, w.units) AS units,
               coalesce(r.running, 0) AS running, coalesce(r.held, 0) AS held, coalesce(w.waiting, 0) AS waiting
        FROM running r FULL JOIN waiting w ON w.pool = r.pool AND w.job_id = r.job_id
        ORDER BY 1, 5 DESC, 6 DESC, 2 LIMIT %s""", (limit,))
    out: dict[str, list[Row]] = {}
    for r in found:
        out.setdefault(r["pool"], []).append(r)
    return out


def breakers(live: list[Row]) -> list[dict[str, Any]]:
    """Circuit breakers that are open or counting failures, per live relay and queue (from
    each relay's heartbeat in cronbox.processes.info), as `cronbox status` lists them."""
    from cronbox.status import Result
    from cronbox.status import breakers as status_breakers

    found = status_breakers(Result(live)).rows or []
    return sorted(found, key=lambda b: (b["state"] != "open", str(b["queue"]), str(b["relay"])))


async def held_counts(conn: AsyncConnection) -> Row:
    """Quarantined (set aside by the poller) and paused schedules the role may see: a walk of
    job_paused_idx (paused schedules are few)."""
    row = await one(conn, """
        SELECT count(*) FILTER (WHERE status = 'quarantined') AS quarantined,
               count(*) FILTER (WHERE status = 'paused') AS paused
        FROM cronbox.schedules WHERE paused""")
    assert row is not None
    return row


async def failures_last_hour(conn: AsyncConnection) -> int:
    """Runs that finished failed or lost in the last hour (the per-minute counts)."""
    row = await one(conn, """
        SELECT coalesce(sum(failed), 0) AS n FROM cronbox.run_minutes
        WHERE minute >= date_trunc('minute', now()) - interval '1 hour'""")
    return int(row["n"]) if row else 0


async def runs_per_minute(conn: AsyncConnection, hours: int) -> tuple[datetime, list[Row]]:
    """Finished runs per minute over the last `hours` (by finish time), succeeded vs failed,
    from cronbox.run_minutes: the per-minute counts the poller keeps (cronbox.tally_runs) plus
    the runs it has not counted yet, so the cost does not follow how many runs the window holds."""
    start = await one(conn, "SELECT date_trunc('minute', now()) - make_interval(hours => %s) AS t", (hours,))
    assert start is not None
    data = await rows(conn, """
        SELECT minute, sum(succeeded) AS ok, sum(failed) AS bad
        FROM cronbox.run_minutes WHERE minute >= %(t)s
        GROUP BY 1 ORDER BY 1""", {"t": start["t"]})
    return start["t"], data


# -- schedules ----------------------------------------------------------------------------

async def schedules(conn: AsyncConnection, q: str, after: str | None, status: str | None = None,
                    limit: int = PAGE) -> list[Row]:
    """One page of schedules by name (keyset: name > after). The page's names come first:
    from the name index, or for a search from cronbox.search_schedules (a trigram index;
    row security applies); then only those rows get next fires and run statistics. A status
    filter reads cronbox.schedules (paused and quarantined ones through job_paused_idx)."""
    if status:
        held = "s.paused AND " if status in ("paused", "quarantined") else "NOT s.paused AND "
        match = ("s.name IN (SELECT n FROM cronbox.search_schedules(%(q)s, NULL, 1000) AS n) AND " if q else "")
        page = f"""SELECT s.name FROM cronbox.schedules s WHERE {held}{match}s.status = %(status)s
                   AND (%(after)s::text IS NULL OR s.name > %(after)s) ORDER BY s.name LIMIT %(limit)s"""
    else:
        page = ("SELECT n AS name FROM cronbox.search_schedules(%(q)s, %(after)s, %(limit)s) AS n" if q else
                """SELECT d.name FROM cronbox.schedule_definitions d
                   WHERE (%(after)s::text IS NULL OR d.name > %(after)s) ORDER BY d.name LIMIT %(limit)s""")
    return await rows(conn, """
        WITH page AS MATERIALIZED (""" + page + """)
        SELECT s.name, s.expression, s.timezone, s.status, s.paused, s.paused_reason, s.queue,
               s.next_fire, s.last_run_state, s.last_success_at, s.consecutive_failures,
               s.active_runs, s.owner, s.job_id, nf.fires, st.finished, st.succeeded, st.p50, st.p95, st.strip
        FROM page JOIN cronbox.schedules s ON s.name = page.name
        LEFT JOIN LATERAL (
            SELECT array_agg(f.fire_at ORDER BY f.fire_at) AS fires
            FROM (SELECT u.fire_at FROM cronbox.upcoming_fires u WHERE u.job_id = s.job_id
                  ORDER BY u.fire_at LIMIT 3) f
        ) nf ON true
        LEFT JOIN LATERAL (
            SELECT count(*) FILTER (WHERE r.state IN ('succeeded', 'failed', 'lost')) AS finished,
                   count(*) FILTER (WHERE r.state = 'succeeded') AS succeeded,
                   percentile_cont(0.5) WITHIN GROUP (ORDER BY r.duration) AS p50,
                   percentile_cont(0.95) WITHIN GROUP (ORDER BY r.duration) AS p95,
                   -- the strip of latest runs, from the same rows (newest first)
                   (array_agg(ARRAY[r.run_id::text, r.state, extract(epoch FROM r.duration)::text, r.fire_at::text,
                                    r.origin] ORDER BY r.run_id DESC))[1:%(strip)s] AS strip
            FROM (SELECT x.run_id, x.state, x.duration, x.fire_at, x.origin FROM cronbox.runs x
                  WHERE x.job_id = s.job_id AND x.run_id IS NOT NULL ORDER BY x.run_id DESC LIMIT %(recent)s) r
        ) st ON true
        ORDER BY s.name""",
        {"q": q or None, "after": after, "limit": limit + 1, "recent": RECENT, "status": status, "strip": STRIP})


async def schedule(conn: AsyncConnection, name: str) -> Row | None:
    return await one(conn, "SELECT * FROM cronbox.schedules WHERE name = %s", (name,))


async def definition(conn: AsyncConnection, name: str) -> Row | None:
    return await one(conn, "SELECT * FROM cronbox.schedule_definitions WHERE name = %s", (name,))


async def next_fires(conn: AsyncConnection, name: str, job_id: int, n: int) -> list[Row]:
    """The next n fires as cronbox.next_fires computes them (the poller's engine, exclusion
    calendars, max_runs, nothing while paused), each with its materialised future if the poller
    has stored it (due time, hold), plus materialised retries and manual runs; by fire time."""
    return await rows(conn, """
        SELECT n.fire_at, u.due_at, coalesce(u.origin, 'schedule') AS origin, coalesce(u.attempt, 1) AS attempt,
               u.hold, u.job_id IS NOT NULL AS stored
        FROM cronbox.next_fires(%(name)s, %(n)s) n
        LEFT JOIN cronbox.upcoming_fires u ON u.job_id = %(job)s AND u.fire_at = n.fire_at
                                          AND u.origin = 'schedule' AND u.attempt = 1
        UNION ALL
        SELECT u.fire_at, u.due_at, u.origin, u.attempt, u.hold, true
        FROM cronbox.upcoming_fires u
        WHERE u.job_id = %(job)s AND (u.origin <> 'schedule' OR u.attempt > 1)
        ORDER BY 1, 4 LIMIT %(n)s""", {"name": name, "job": job_id, "n": n})


async def upcoming(conn: AsyncConnection, job_id: int, n: int) -> list[Row]:
    return await rows(conn, """
        SELECT fire_at, due_at, origin, attempt, hold, timezone FROM cronbox.upcoming_fires
        WHERE job_id = %s ORDER BY fire_at, attempt LIMIT %s""", (job_id, n))


async def backfills(conn: AsyncConnection, job_id: int, limit: int = 10) -> list[Row]:
    return await rows(conn, """
        SELECT backfill_id, from_at, to_at, overlap, state, fires, duplicates, requested_by, requested_at,
               outcome FROM cronbox.backfills
        WHERE job_id = %s ORDER BY backfill_id DESC LIMIT %s""", (job_id, limit))


async def changes(conn: AsyncConnection, job_id: int, limit: int = 30) -> list[Row]:
    return await rows(conn, """
        SELECT changed_at, action, reason, changed_by FROM cronbox.schedule_changes
        WHERE job_id = %s ORDER BY change_id DESC LIMIT %s""", (job_id, limit))


async def edges(conn: AsyncConnection, name: str) -> list[Row]:
    """Upstream and downstream edges of a job, two levels each way, with the last run state of
    both ends (cronbox.dependency_graph; row security decides what the role sees)."""
    return await rows(conn, "SELECT * FROM cronbox.dependency_graph(%s, 2)", (name,))


# -- runs ---------------------------------------------------------------------------------

async def job_ids(conn: AsyncConnection, name: str) -> list[int]:
    """Ids a job name had (also after unschedule, from the change log)."""
    found = await rows(conn, """
        SELECT job_id FROM cronbox.schedules WHERE name = %(n)s
        UNION SELECT job_id FROM cronbox.schedule_changes WHERE job = %(n)s AND action = 'created'""",
        {"n": name})
    return [r["job_id"] for r in found]


async def run(conn: AsyncConnection, run_id: int) -> Row | None:
    return await one(conn, "SELECT * FROM cronbox.runs WHERE run_id = %s", (run_id,))


async def attempts(conn: AsyncConnection, r: Row) -> list[Row]:
    """Every attempt of the same fire: walk retry_of up to the first, then later ones."""
    return await rows(conn, """
        WITH RECURSIVE chain AS (
            SELECT run_id, retry_of FROM cronbox.runs WHERE run_id = %(id)s
            UNION ALL SELECT p.run_id, p.retry_of FROM cronbox.runs p JOIN chain c ON p.run_id = c.retry_of
        ), first AS (SELECT min(run_id) AS run_id FROM chain)
        (SELECT x.run_id, x.attempt, x.state, x.dispatched_at, x.started_at, x.finished_at, x.duration,
                x.worker, pg_catalog.left(x.error, 200) AS error, x.waiting_for
         FROM cronbox.runs x, first
         WHERE x.job_id = %(job)s AND x.fire_at = %(fire)s AND x.run_id >= first.run_id
         ORDER BY x.run_id LIMIT 50)
        UNION ALL  -- the next attempt, when it waits to be dispatched (a retry held for a pool, ...)
        (SELECT NULL, w.attempt, w.state, NULL, NULL, NULL, NULL, NULL, NULL, w.waiting_for
         FROM cronbox.runs w
         WHERE w.state = 'waiting' AND w.job_id = %(job)s AND w.fire_at = %(fire)s AND w.attempt > %(attempt)s
         ORDER BY w.attempt LIMIT 5)""",
        {"id": r["run_id"], "job": r["job_id"], "fire": r["fire_at"], "attempt": r["attempt"]})


async def recent_runs(conn: AsyncConnection, job_id: int, limit: int = 20) -> list[Row]:
    from web.history import runs

    return await runs(conn, job_ids=[job_id], limit=limit)


# -- dead letters -------------------------------------------------------------------------

async def dead_letters(conn: AsyncConnection, queue: str | None, before: int | None, limit: int = PAGE) -> list[Row]:
    return await rows(conn, """
        SELECT dead_letter_id, queue, kind, run_id, job, attempts, pg_catalog.left(last_error, 300) AS last_error,
               created_at, dead_at
        FROM cronbox.dead_letters
        WHERE (%(queue)s::text IS NULL OR queue = %(queue)s)
          AND (%(before)s::bigint IS NULL OR dead_letter_id < %(before)s)
        ORDER BY dead_letter_id DESC LIMIT %(limit)s""", {"queue": queue, "before": before, "limit": limit + 1})


async def dead_letter_queues(conn: AsyncConnection) -> list[Row]:
    return await rows(conn, "SELECT queue, count(*) AS n FROM cronbox.dead_letters GROUP BY queue ORDER BY queue")
