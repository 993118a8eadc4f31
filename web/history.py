"""Run history for the console: the runs list (filters, sorts, keyset pages) and the strips of
a schedule's latest runs. Every read walks an index newest first and stops after a page."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from psycopg import AsyncConnection, sql

from web.queries import PAGE, TROUBLE, UNFINISHED, Row, rows

OWNED_WALK = 500  # an owner with at most this many schedules gets its runs job by job
SORT_WINDOW = 10_000  # sorting by fire time or duration orders the newest this many matches
JOB_MATCHES = 200  # a job filter that is a substring: runs of at most this many matching schedules
ORDERS = {"created": "newest first", "fire": "fire time, latest first", "duration": "longest first"}
COLUMNS = sql.SQL("""run_id, job, queue, fire_at, state, attempt, origin, dispatched_at, started_at,
               finished_at, duration, worker, pg_catalog.left(error, 200) AS error""")
_NO_DURATION = timedelta(seconds=-1)  # unfinished runs sort after every finished one


@dataclass
class Sorting:
    """A sort other than newest first: the window's newest run (pinned so later runs do not
    shift the pages) and the last row of the previous page."""

    order: str = "created"
    top: int | None = None
    after_key: Any = None
    after_id: int | None = None


@dataclass
class Filters:
    job_ids: list[int] | None = None
    queue: str | None = None
    states: list[str] = field(default_factory=list)
    since: datetime | None = None
    until: datetime | None = None
    before: int | None = None


async def owned_job_ids(conn: AsyncConnection) -> list[int]:
    """The ids of the schedules the request's role may see (row security): for a role limited
    to its own schedules."""
    found = await rows(conn, "SELECT job_id FROM cronbox.schedule_definitions LIMIT %s", (OWNED_WALK + 1,))
    return [r["job_id"] for r in found]


async def job_ids(conn: AsyncConnection, text: str) -> list[int]:
    """Ids of the jobs whose name is `text` (also after unschedule, from the change log) or
    contains it (cronbox.search_schedules: case-insensitive, at most JOB_MATCHES schedules)."""
    found = await rows(conn, """
        SELECT job_id FROM cronbox.schedules WHERE name = %(n)s
        UNION SELECT job_id FROM cronbox.schedule_changes WHERE job = %(n)s AND action = 'created'
        UNION SELECT s.job_id FROM cronbox.search_schedules(%(n)s, NULL, %(max)s) AS m(name)
              JOIN cronbox.schedules s ON s.name = m.name""", {"n": text, "max": JOB_MATCHES})
    return [r["job_id"] for r in found]


def _state_conds(state: str, key: str) -> list[sql.Composable]:
    """One state's condition, in the shape an index serves: the bad final states are in
    run_trouble_history_idx under `trouble` (migration 0190); the unfinished ones are few and
    come from cronbox.unfinished_runs(); succeeded is most of history, walked newest first."""
    conds: list[sql.Composable] = [sql.SQL("state = {}").format(sql.Placeholder(key))]
    if state in TROUBLE:
        conds.append(sql.SQL("trouble = {}").format(sql.Placeholder(key)))
    elif state in UNFINISHED:
        conds.append(sql.SQL("run_id IN (SELECT u.run_id FROM cronbox.unfinished_runs() u WHERE u.state = {})")
                     .format(sql.Placeholder(key)))
    return conds


def _newest(f: Filters, limit: int, owned: list[int] | None, params: dict[str, Any]) -> sql.Composable:
    """The newest `limit` runs that match, by run_id descending. `run_id IS NOT NULL` leaves
    cronbox.runs' arm of waiting fires (no run yet) out when the query is planned."""
    conds: list[sql.Composable] = [sql.SQL("run_id IS NOT NULL")]
    params["limit"] = limit
    if f.job_ids is not None and len(f.job_ids) == 1:  # the usual case: (job_id, run_id DESC) gives the order
        conds.append(sql.SQL("job_id = %(job_id)s"))
        params["job_id"] = f.job_ids[0]
    elif f.job_ids is not None and len(f.job_ids) <= OWNED_WALK:  # a substring, a name re-used: several ids
        owned = f.job_ids
    elif f.job_ids is not None:
        conds.append(sql.SQL("job_id = ANY(%(job_ids)s)"))
        params["job_ids"] = f.job_ids
    if f.queue:
        conds.append(sql.SQL("queue = %(queue)s"))
        params["queue"] = f.queue
    if f.since:
        conds.append(sql.SQL("run_id >= cronbox.run_id_at(%(since)s)"))
        params["since"] = f.since
    if f.until:
        conds.append(sql.SQL("run_id < cronbox.run_id_at(%(until)s)"))
        params["until"] = f.until
    if f.before is not None:
        conds.append(sql.SQL("run_id < %(before)s"))
        params["before"] = f.before
    where = sql.SQL(" AND ").join(conds)
    if owned is not None and len(owned) <= OWNED_WALK:
        # Each job's newest runs from run_job_history_idx, merged: rather than walking all of
        # history newest first while row security (or the filter) drops other jobs' runs.
        params["owned"] = owned
        state = sql.SQL("true")
        if f.states:
            state = sql.SQL("state = ANY(%(states)s)")
            params["states"] = f.states
        return sql.SQL("""
            SELECT r.* FROM pg_catalog.unnest(%(owned)s::bigint[]) AS o(id) CROSS JOIN LATERAL (
                SELECT {} FROM cronbox.runs WHERE job_id = o.id AND {} AND {} ORDER BY run_id DESC LIMIT %(limit)s
            ) r ORDER BY r.run_id DESC LIMIT %(limit)s""").format(COLUMNS, where, state)
    if len(f.states) <= 1:
        state_conds = _state_conds(f.states[0], "state0") if f.states else []
        if f.states:
            params["state0"] = f.states[0]
        return sql.SQL("SELECT {} FROM cronbox.runs WHERE {} ORDER BY run_id DESC LIMIT %(limit)s").format(
            COLUMNS, sql.SQL(" AND ").join([where, *state_conds]))
    # Several states: each through its own index, newest first, merged.
    parts = []
    for i, state in enumerate(f.states):
        params[f"state{i}"] = state
        parts.append(sql.SQL("(SELECT {} FROM cronbox.runs WHERE {} ORDER BY run_id DESC LIMIT %(limit)s)").format(
            COLUMNS, sql.SQL(" AND ").join([where, *_state_conds(state, f"state{i}")])))
    return sql.SQL("SELECT * FROM ({}) m ORDER BY m.run_id DESC LIMIT %(limit)s").format(
        sql.SQL(" UNION ALL ").join(parts))


def sort_key(order: str) -> sql.Composable:
    return (sql.SQL("w.fire_at") if order == "fire" else
            sql.SQL("coalesce(w.duration, {})").format(sql.Literal(_NO_DURATION)))


async def runs(conn: AsyncConnection, f: Filters | None = None, *, limit: int = PAGE,
               owned: list[int] | None = None, sorting: Sorting | None = None, **kw: Any) -> list[Row]:
    """One page (plus one row, to know whether there is a next) of runs. Newest first is a
    walk of an index, keyset by run_id. Fire time and duration order the newest SORT_WINDOW
    matches (up to `top`, pinned by the first page), keyset by (key, run_id)."""
    f = f or Filters(**kw)
    params: dict[str, Any] = {}
    sorting = sorting or Sorting()
    if sorting.order == "created":
        return await rows(conn, _newest(f, limit + 1, owned, params), params)
    if sorting.top is not None:
        f.before = sorting.top + 1 if f.before is None else min(f.before, sorting.top + 1)
    window = _newest(f, SORT_WINDOW, owned, params)
    key = sort_key(sorting.order)
    after = sql.SQL("true")
    if sorting.after_id is not None:
        after = sql.SQL("({}, w.run_id) < (%(after_key)s, %(after_id)s)").format(key)
        params["after_key"] = sorting.after_key if sorting.order == "fire" else (
            timedelta(seconds=float(sorting.after_key)))
        params["after_id"] = sorting.after_id
    params["page"] = limit + 1
    # window_top: the window's newest run, which the next pages pin as `top`
    return await rows(conn, sql.SQL("""
        SELECT w.* FROM (SELECT v.*, max(v.run_id) OVER () AS window_top FROM ({}) v) w
        WHERE {} ORDER BY {} DESC, w.run_id DESC LIMIT %(page)s""").format(window, after, key), params)


def cursor_of(row: Row, order: str) -> str:
    """The keyset value of a row for the next page's URL."""
    if order == "fire":
        return row["fire_at"].isoformat()
    duration = row["duration"] if row["duration"] is not None else _NO_DURATION
    return f"{duration.total_seconds():.6f}"


def strip_cells(cells: list[list[str | None]] | None) -> list[Row]:
    """A strip read as text arrays (run_id, state, seconds, fire_at, origin; newest first), as
    rows oldest first."""
    out = []
    for run_id, state, seconds, fire_at, origin in reversed(cells or []):
        out.append({"run_id": int(run_id or 0), "state": state, "origin": origin,
                    "duration": timedelta(seconds=float(seconds)) if seconds is not None else None,
                    "fire_at": datetime.fromisoformat(fire_at) if fire_at else None})
    return out


async def strips(conn: AsyncConnection, job_ids: list[int], n: int) -> dict[int, list[Row]]:
    """Each job's latest `n` runs, oldest first (a strip of states with durations), from
    run_job_history_idx: n rows per job."""
    if not job_ids:
        return {}
    found = await rows(conn, """
        SELECT o.id AS job_id, r.run_id, r.state, r.duration, r.fire_at, r.origin
        FROM pg_catalog.unnest(%(ids)s::bigint[]) AS o(id) CROSS JOIN LATERAL (
            SELECT x.run_id, x.state, x.duration, x.fire_at, x.origin FROM cronbox.runs x
            WHERE x.job_id = o.id AND x.run_id IS NOT NULL ORDER BY x.run_id DESC LIMIT %(n)s) r
        ORDER BY o.id, r.run_id""", {"ids": job_ids, "n": n})
    out: dict[int, list[Row]] = {}
    for r in found:
        out.setdefault(r["job_id"], []).append(r)
    return out


WAITING = 20  # waiting fires listed above a runs list


async def waiting(conn: AsyncConnection, job_ids: list[int] | None = None, queue: str | None = None,
                  limit: int = WAITING) -> tuple[list[Row], int]:
    """Fires held back from dispatch (cronbox.runs, state waiting: for a pool's units, a queue's
    limit, dependencies or an earlier run), longest waiting first, and how many there are
    (state = 'waiting' leaves history out of the plan: run.state's CHECK constraint excludes it)."""
    conds = [sql.SQL("state = 'waiting'")]
    params: dict[str, Any] = {"limit": limit}
    if job_ids is not None:
        conds.append(sql.SQL("job_id = ANY(%(ids)s)"))
        params["ids"] = job_ids
    if queue:
        conds.append(sql.SQL("queue = %(queue)s"))
        params["queue"] = queue
    found = await rows(conn, sql.SQL("""
        SELECT job, queue, fire_at, attempt, origin, waiting_for, waiting_since, needs, count(*) OVER () AS n
        FROM cronbox.runs WHERE {} ORDER BY waiting_since, fire_at LIMIT %(limit)s""").format(
        sql.SQL(" AND ").join(conds)), params)
    return found, int(found[0]["n"]) if found else 0
