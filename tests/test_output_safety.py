"""Output is safe to print: text users or workers supplied never reaches a terminal raw
(`cronbox status`, CLI error lines, text logs), long texts are cut, JSON logs stay valid JSON."""

from __future__ import annotations

import io
import logging
import os
import subprocess

import orjson

from cronbox import db, log
from cronbox.text import printable

from .conftest import cronbox_cmd

HOSTILE = "boom \x1b[2J\x1b]0;pwned\x07\x9b31m \u202eevil\u2028 tab\there\r\x00"
RAW_CONTROLS = ("\x1b", "\x07", "\x9b", "\u202e", "\u2028", "\r", "\x00", "\t")


def test_printable_escapes_every_control_and_cuts_long_text():
    out = printable(HOSTILE)
    assert not any(c in out for c in RAW_CONTROLS)
    assert "\\x1b[2J" in out and "\\u202e" in out and "évil" not in out
    assert printable("naïve 日本 ok") == "naïve 日本 ok"  # plain unicode text is left alone
    cut = printable("x" * 10_000_000, 48)
    assert len(cut) <= 48 and cut.endswith("...[10000000 chars]")


def _run(dsn: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "CRONBOX_", "DATABASE_URL"))}
    return subprocess.run(cronbox_cmd(*args), env={**env, "DATABASE_URL": dsn},
                          capture_output=True, text=True, timeout=60)


def test_status_escapes_worker_and_operator_text_and_lists_quarantined_jobs(fresh_dsn):
    with db.connect(fresh_dsn) as conn:
        conn.execute("SELECT cronbox.schedule('ok', every => '1 hour')")
        conn.execute("SELECT cronbox.schedule('bad', every => '1 hour')")
        stored = HOSTILE.replace("\x00", "")  # PostgreSQL text cannot hold NUL
        conn.execute("SELECT cronbox.pause('ok', %s)", (stored + "y" * 900,))
        job_id = conn.execute("SELECT job_id FROM cronbox.job WHERE name = 'bad'").fetchone()[0]
        conn.execute("SELECT cronbox.quarantine_job(%s, %s)", (job_id, stored))
    out = _run(fresh_dsn, "status")
    assert out.returncode == 0, out.stderr
    assert not any(c in out.stdout for c in RAW_CONTROLS[:-1]), repr(out.stdout)
    quarantined = out.stdout.split("quarantined:\n", 1)[1].split("\n\n", 1)[0]
    assert "bad" in quarantined and "\\x1b[2J" in quarantined and "ok " not in quarantined
    assert all(len(line) < 400 for line in out.stdout.splitlines())  # long reasons are cut
    schedules = out.stdout.split("schedules:\n", 1)[1].split("\n\n", 1)[0]
    assert "status" in schedules.splitlines()[0]
    assert {"quarantined", "paused"} <= set(schedules.split())


def test_cli_error_lines_are_escaped(tmp_path):
    out = _run("postgresql://127.0.0.1:1/x?application_name=a", "status")  # nobody listens on port 1
    assert out.returncode != 0 and out.stderr.startswith("cronbox: ")
    assert "\x1b" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_logs_stay_valid_json_and_text_logs_stay_one_escaped_line():
    for fmt in ("json", "text"):
        log.setup("info", fmt)
        stream = io.StringIO()
        logging.getLogger().handlers[0].setStream(stream)
        log.event(logging.getLogger("t"), "job quarantined " + HOSTILE, error=HOSTILE + "\ud800", job="x\ny")
        lines = stream.getvalue().splitlines()
        assert len(lines) == 1, lines
        if fmt == "json":
            doc = orjson.loads(lines[0])
            assert doc["msg"].startswith("job quarantined boom \x1b[2J")  # data kept, JSON-escaped
        else:
            assert not any(c in lines[0] for c in RAW_CONTROLS)
    log.setup("info", "text")
