"""`cronbox status`: what an operator needs at a glance, read from the views only."""

from __future__ import annotations

import sys
from typing import Any

import orjson
from psycopg.rows import dict_row

from cronbox import db

SECTIONS = {
    "schedules": "SELECT name, expression, timezone, paused, next_fire, last_run_state, "
                 "last_success_at, consecutive_failures, active_runs FROM cronbox.schedules ORDER BY name",
}


def _table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "  (none)"
    cols = list(rows[0])
    cells = [[("" if r[c] is None else str(r[c])) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    lines = ["  " + "  ".join(c.ljust(w) for c, w in zip(cols, widths))]
    lines += ["  " + "  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def show(dsn: str, *, as_json: bool = False) -> int:
    with db.connect(dsn, row_factory=dict_row) as conn:
        data = {name: conn.execute(sql).fetchall() for name, sql in SECTIONS.items()}
    if as_json:
        sys.stdout.write(orjson.dumps(data, default=str, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        for name, rows in data.items():
            print(f"{name}:\n{_table(rows)}\n")
    return 0
