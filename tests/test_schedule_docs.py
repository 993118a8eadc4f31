"""The psql examples of docs/schedules.md for preview, next_fires, calendars and max_runs run as
written against a real database (a refused one is refused with the SQLSTATE the text says), and
the preview output the page shows is what preview returns."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

import psycopg
import pytest

from cronbox import db

DOC = (Path(__file__).resolve().parents[1] / "docs" / "schedules.md").read_text()


def _blocks(section: str) -> list[str]:
    body = DOC.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sql\n(.*?)```", body, flags=re.S)


def _statements(block: str) -> list[tuple[str, str]]:
    """(statement, its trailing comment) for each statement of a block."""
    out, current = [], []
    for line in block.splitlines():
        code, _, comment = line.partition("--")
        if not code.strip() and not current:
            continue
        current.append(code)
        if code.rstrip().endswith(";"):
            out.append(("\n".join(current), comment))
            current = []
    return out


def test_the_calendar_and_preview_examples_run_as_written(fresh_dsn):
    ran = 0
    with db.connect(fresh_dsn) as conn:
        for section in ("Exclusion calendars", "Preview and next fires"):
            for block in _blocks(section):
                for stmt, comment in _statements(block):
                    if "refused" in comment:
                        state = re.search(r"\((\w{5})\)", comment).group(1)
                        with pytest.raises(psycopg.Error) as info, conn.transaction():
                            conn.execute(stmt)
                        assert info.value.sqlstate == state, stmt
                    else:
                        cur = conn.execute(stmt)
                        if cur.description:
                            cur.fetchall()
                    ran += 1
    assert ran >= 8


def test_the_preview_output_shown_is_what_preview_returns(conn):
    shown = re.findall(r"--  (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\+00)", _blocks("Preview and next fires")[0])
    got = [r[0] for r in conn.execute(
        "SELECT fire_at FROM cronbox.preview_at(cron => '30 2 * * *', timezone => 'Europe/Berlin', n => 3, "
        "p_now => %s)", (datetime(2030, 3, 29, 12, 0, tzinfo=timezone.utc),))]
    assert [t.strftime("%Y-%m-%d %H:%M:%S+00") for t in got] == shown
