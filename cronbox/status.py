"""`cronbox status`: what an operator needs at a glance, read from the views only.

Sections: schedules (next fire, last state, failures), quarantined and paused schedules
(with paused_until), queues (due, in outbox, running, oldest lag), resource pools, fires waiting
to be dispatched and why, dead letters, live
processes (and those gone within the hour; older ones are counted, not listed), on Citus with
the buckets each poller and relay holds. Plain aligned
text that survives a pipe (no
colour, no terminal tricks; long cells are shortened), or `--json` for scripts (full
values). A view that does not exist in this database, or that the role may not read, is
reported as such instead of failing the command, so `cronbox status` works for a
cronbox_reader, a cronbox_user (who sees only its own schedules) and an older schema alike.
"""

from __future__ import annotations

import dataclasses
import sys
from datetime import datetime, timedelta
from typing import Any

import orjson
import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from cronbox import db
from cronbox.text import printable

MAX_CELL = 48


@dataclasses.dataclass(frozen=True)
class Section:
    title: str
    view: str
    columns: tuple[str, ...] | None  # preferred columns, in order (None: every column)
    order: str | None = None
    where: str | None = None  # a fixed filter (SQL text, no user input)
    where_needs: str = "status"  # the column the filter reads (an older schema may lack it)
    hidden: str | None = None  # what the rows the filter leaves out are, for the count line


SECTIONS = (
    Section("schedules", "schedules",
            ("name", "expression", "timezone", "queue", "status", "next_fire", "last_run_state",
             "last_success_at", "consecutive_failures", "consecutive_crashes", "active_runs"), "name"),
    # Jobs the poller set aside because it could not process them (docs/operations.md).
    Section("quarantined", "schedules", ("name", "paused_at", "paused_reason"), "name",
            where="status = 'quarantined'"),
    # Paused schedules, and when each resumes by itself (pause(..., until => ...)).
    Section("paused", "schedules", ("name", "paused_at", "paused_until", "paused_reason"), "name",
            where="status = 'paused'"),
    Section("queues", "queues", None, "queue"),
    # Resource pools: capacity, units in use, free, fires waiting (docs/runs.md, "Resource pools").
    Section("pools", "pools", ("name", "capacity", "in_use", "free", "waiting", "oldest_wait"), "name"),
    # Fires held back from dispatch and why (cronbox.runs, state waiting: a pool's units, a
    # queue's limit, dependencies, an earlier run), longest waiting first. The state filter
    # leaves history out of the plan (run.state's CHECK constraint cannot be 'waiting').
    Section("waiting", "runs", ("job", "queue", "fire_at", "attempt", "waiting_for", "waiting_since"),
            "waiting_since", where="state = 'waiting'", where_needs="waiting_for"),
    Section("dead letters", "dead_letters", None, None),
    # Live processes and those gone within the hour (a crash worth seeing); older entries stay in
    # cronbox.processes for a day but are only counted here.
    Section("processes", "processes", None, None,
            where="live OR last_seen >= now() - interval '1 hour'", where_needs="live",
            hidden="not seen for over an hour"),
)


@dataclasses.dataclass
class Result:
    rows: list[dict[str, Any]] | None
    more: bool = False
    note: str | None = None  # why rows is None
    hidden: int = 0  # rows the section's filter left out


def _read(conn: psycopg.Connection, section: Section, limit: int) -> Result:
    found = conn.execute("SELECT to_regclass(%s) IS NOT NULL AS found", (f"cronbox.{section.view}",)).fetchone()
    if not found or not found["found"]:
        return Result(None, note="(view not available)")
    cur = conn.execute(sql.SQL("SELECT * FROM cronbox.{} LIMIT 0").format(sql.Identifier(section.view)))
    have = [d.name for d in cur.description or []]
    cols = [c for c in section.columns if c in have] if section.columns else have
    query = sql.SQL("SELECT {} FROM cronbox.{}").format(
        sql.SQL(", ").join(sql.Identifier(c) for c in cols), sql.Identifier(section.view))
    hidden = 0
    if section.where:
        if section.where_needs not in have:
            return Result([], note=None) if section.hidden is None else Result(None, note="(view not available)")
        if section.hidden:
            hidden = conn.execute(sql.SQL("SELECT count(*) AS n FROM cronbox.{} WHERE NOT ({})").format(
                sql.Identifier(section.view), sql.SQL(section.where))).fetchone()["n"]
        query += sql.SQL(" WHERE " + section.where)
    if section.order and section.order in have:
        query += sql.SQL(" ORDER BY {}").format(sql.Identifier(section.order))
    query += sql.SQL(" LIMIT {}").format(sql.Literal(limit + 1))
    rows = conn.execute(query).fetchall()
    return Result(rows[:limit], more=len(rows) > limit, hidden=hidden)


def collect(dsn: str, limit: int = 50) -> dict[str, Result]:
    out: dict[str, Result] = {}
    with db.connect(dsn, row_factory=dict_row) as conn:
        for section in SECTIONS:
            try:
                out[section.title] = _read(conn, section, limit)
            except psycopg.errors.InsufficientPrivilege:
                out[section.title] = Result(None, note="(not permitted for this role)")
        buckets_held(conn, out.get("processes"))
    out["circuit breakers"] = breakers(out.get("processes"))
    return out


def buckets_held(conn: psycopg.Connection, processes: Result | None) -> bool:
    """On Citus (the view cronbox.buckets): each poller's and relay's row of the processes
    section gets `buckets`, the buckets its live lease holds, as "n of B: i-j, k" (bucket
    indexes, as cronbox.buckets lists them). Nothing changes where there are no buckets (plain
    PostgreSQL) or the role may not read them. True when the column was added."""
    if processes is None or not processes.rows:
        return False
    found = conn.execute("SELECT to_regclass('cronbox.buckets') IS NOT NULL AS found").fetchone()
    if not found or not found["found"]:
        return False
    try:
        with conn.transaction():
            rows = conn.execute("SELECT bucket_index, poller, relay FROM cronbox.buckets").fetchall()
    except psycopg.errors.InsufficientPrivilege:
        return False
    if not rows:  # a role that does not read everything gets no rows
        return False
    by_owner: dict[tuple[str, str], list[int]] = {}
    for r in rows:
        for kind in ("poller", "relay"):
            if r[kind] is not None:
                by_owner.setdefault((kind, r[kind]), []).append(r["bucket_index"])
    for p in processes.rows:  # every row gets the column (a worker's and a console's: empty)
        live = p.get("kind") in ("poller", "relay") and p.get("live") is not False
        p["buckets"] = bucket_ranges(by_owner.get((p["kind"], p.get("name")), []), len(rows)) if live else None
    return True


def bucket_ranges(indexes: list[int], total: int) -> str:
    """"3 of 32: 0-1, 5": how many buckets, of how many, and which (runs of indexes)."""
    runs: list[list[int]] = []
    for i in sorted(indexes):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    text = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
    return f"{len(indexes)} of {total}" + (f": {text}" if text else "")


def breakers(processes: Result | None) -> Result:
    """Per live relay and queue, the circuit breakers that are open or counting failures (from
    cronbox.processes.info, refreshed with each relay heartbeat)."""
    if processes is None or processes.rows is None:
        return Result(None, note="(needs the processes view)")
    rows = []
    for p in processes.rows:
        info = p.get("info") or {}
        if p.get("kind") != "relay" or p.get("live") is False or not isinstance(info, dict):
            continue
        for queue, b in sorted((info.get("breakers") or {}).items()):
            if isinstance(b, dict):
                rows.append({"relay": p.get("name"), "queue": queue, "state": b.get("state"),
                             "consecutive_failures": b.get("consecutive_failures"),
                             "probe_every_s": b.get("probe_every_s")})
    return Result(rows)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        text = value.isoformat(sep=" ", timespec="seconds")
    elif isinstance(value, timedelta):
        text = _duration(value)
    elif isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, dict | list):
        text = orjson.dumps(value).decode()
    else:
        text = str(value)
    # One line per row, and nothing a user or worker wrote reaches the terminal raw.
    return printable(" ".join(text.split()), MAX_CELL)


def _duration(value: timedelta) -> str:
    seconds = value.total_seconds()
    if abs(seconds) < 60:
        return f"{seconds:.3f}s".replace(".000s", "s")
    return str(value - timedelta(microseconds=value.microseconds))


def table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "  (none)"
    cols = list(rows[0])
    cells = [[_cell(r[c]) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    lines = ["  " + "  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip()]
    lines += ["  " + "  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells]
    return "\n".join(lines)


def render(data: dict[str, Result], limit: int) -> str:
    parts = []
    for title, result in data.items():
        if result.rows is None:
            parts.append(f"{title}: {result.note}")
            continue
        body = table(result.rows)
        if result.more:
            body += f"\n  ... more than {limit}; use --limit or query cronbox.{title.replace(' ', '_')}"
        section = next((s for s in SECTIONS if s.title == title), None)
        if result.hidden and section is not None:
            body += f"\n  ... and {result.hidden} {section.hidden} (query cronbox.{section.view})"
        parts.append(f"{title}:\n{body}")
    return "\n\n".join(parts) + "\n"


def to_json(data: dict[str, Result]) -> str:
    doc = {title.replace(" ", "_"): (r.rows if r.rows is not None else None) for title, r in data.items()}
    doc["unavailable"] = {t.replace(" ", "_"): r.note for t, r in data.items() if r.rows is None}
    doc["hidden"] = {t.replace(" ", "_"): r.hidden for t, r in data.items() if r.hidden}
    return orjson.dumps(doc, default=_json_value, option=orjson.OPT_INDENT_2).decode() + "\n"


def _json_value(value: Any) -> Any:
    """Durations (uptime, lag) as seconds, a number a script can compare; anything else as text."""
    if isinstance(value, timedelta):
        return value.total_seconds()
    return str(value)


def show(dsn: str, *, as_json: bool = False, limit: int = 50) -> int:
    data = collect(dsn, limit)
    sys.stdout.write(to_json(data) if as_json else render(data, limit))
    return 0
