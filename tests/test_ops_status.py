"""`cronbox status`, run as the real command with its output piped, as a reader and a user."""

from __future__ import annotations

import os
import subprocess

import orjson
import psycopg

from cronbox import db

from .conftest import cronbox_cmd
from .roles import logins  # noqa: F401  (fixture)

OPTIONAL_VIEWS = {"queues": "queues", "dead letters": "dead_letters", "processes": "processes"}


def _status(dsn: str, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "CRONBOX_", "DATABASE_URL"))}
    out = subprocess.run(cronbox_cmd("status", *args), env={**env, "DATABASE_URL": dsn},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _existing_views(dsn: str) -> set[str]:
    with db.connect(dsn) as conn:
        return {r[0] for r in conn.execute(
            "SELECT viewname FROM pg_catalog.pg_views WHERE schemaname = 'cronbox'")}


def test_status_as_a_reader_shows_every_section_as_plain_text(fresh_dsn, logins):
    with db.connect(fresh_dsn) as su:
        su.execute("SELECT cronbox.schedule('nightly', cron => '0 3 * * *', timezone => 'Europe/Paris')")
        su.execute("SELECT cronbox.schedule(%s, every => '5 minutes')", ("two lines " + "x" * 80,))
        # a multi-line value (names cannot hold one; a reason can) is flattened to one line
        su.execute("UPDATE cronbox.job_stat SET consecutive_failures = 3 WHERE job_id = "
                   "(SELECT job_id FROM cronbox.job WHERE name = 'two lines ' || repeat('x', 80))")
        su.execute("UPDATE cronbox.job SET name = 'two\nlines ' || repeat('x', 80) "
                   "WHERE name = 'two lines ' || repeat('x', 80)")
    out = _status(logins.dsn(fresh_dsn, "reader"))
    assert "\x1b" not in out  # no terminal escapes when piped
    lines = out.splitlines()
    assert lines[0] == "schedules:"
    header = lines[1].split()
    assert header[:3] == ["name", "expression", "timezone"] and "next_fire" in header
    nightly = next(line for line in lines if line.strip().startswith("nightly"))
    assert "0 3 * * *" in nightly and "Europe/Paris" in nightly and " 3 " in nightly
    assert any(line.strip().startswith("two lines xxx") and "..." in line for line in lines)
    views = _existing_views(fresh_dsn)
    for title, view in OPTIONAL_VIEWS.items():
        if view in views:
            assert f"{title}:" in lines, out
        else:
            assert f"{title}: (view not available)" in lines, out


def test_status_json_is_complete_and_machine_readable(fresh_dsn, logins):
    name = "x" * 120
    with db.connect(fresh_dsn) as su:
        su.execute("SELECT cronbox.schedule(%s, every => '1 hour')", (name,))
        su.execute("SELECT cronbox.schedule('napping', every => '1 hour')")
        until = su.execute("SELECT now() + interval '1 hour'").fetchone()[0]
        su.execute("SELECT cronbox.pause('napping', 'deploy', until => %s)", (until,))
    doc = orjson.loads(_status(logins.dsn(fresh_dsn, "reader"), "--json"))
    assert [s["name"] for s in doc["schedules"]] == ["napping", name]  # not shortened
    assert [(p["name"], p["paused_reason"]) for p in doc["paused"]] == [("napping", "deploy")]
    assert doc["paused"][0]["paused_until"] is not None
    assert doc["schedules"][1]["status"] == "active"  # active, paused, quarantined, finished, waiting
    assert doc["quarantined"] == []
    views = _existing_views(fresh_dsn)
    for title, view in OPTIONAL_VIEWS.items():
        key = title.replace(" ", "_")
        assert (doc[key] is None) == (view not in views)
        assert (key in doc["unavailable"]) == (view not in views)


def test_status_shows_a_user_only_its_own_schedules_and_says_what_it_may_not_read(fresh_dsn, logins):
    for who in ("alice", "bob"):
        with logins.connect(fresh_dsn, who) as c:
            c.execute("SELECT cronbox.schedule(%s, every => '1 hour')", (f"{who}_job",))
    doc = orjson.loads(_status(logins.dsn(fresh_dsn, "bob"), "--json"))
    assert [s["name"] for s in doc["schedules"]] == ["bob_job"]
    with db.connect(fresh_dsn) as su:
        su.execute("REVOKE SELECT ON cronbox.schedules FROM cronbox_reader")
    out = _status(logins.dsn(fresh_dsn, "reader"))
    assert "schedules: (not permitted for this role)" in out.splitlines()


def test_status_limit_says_there_is_more(fresh_dsn, logins):
    with db.connect(fresh_dsn) as su:
        for i in range(4):
            su.execute("SELECT cronbox.schedule(%s, every => '1 hour')", (f"job{i}",))
    out = _status(logins.dsn(fresh_dsn, "admin"), "--limit", "2")
    assert "job1" in out and "job2" not in out and "more than 2" in out


def test_status_lists_open_circuit_breakers_reported_by_live_relays(fresh_dsn, logins):
    with db.connect(fresh_dsn) as su:
        pid = su.execute("SELECT cronbox.register_process('relay', 'relay:h:1', 'h', 1, 'test', interval '5 seconds', "
                         "'{}'::jsonb)").fetchone()[0]
        info = {"sinks": ["*=log"], "breakers": {"billing": {"state": "open", "consecutive_failures": 7,
                                                             "probe_every_s": 4.0}}}
        assert su.execute("SELECT cronbox.touch_process(%s, %s)", (pid, db.Jsonb(info))).fetchone()[0] is True
        for bad in ("[]", "null"):
            try:
                su.execute("SELECT cronbox.touch_process(%s, %s::jsonb)", (pid, bad))
                raise AssertionError("touch_process accepted a non-object info")
            except psycopg.errors.InvalidParameterValue as exc:
                assert "p_info" in str(exc)
                su.rollback()
    text = _status(logins.dsn(fresh_dsn, "reader"))
    section = text.split("circuit breakers:\n", 1)[1]
    assert "billing" in section.splitlines()[1] and "open" in section.splitlines()[1]
    doc = orjson.loads(_status(logins.dsn(fresh_dsn, "reader"), "--json"))
    assert doc["circuit_breakers"] == [{"relay": "relay:h:1", "queue": "billing", "state": "open",
                                        "consecutive_failures": 7, "probe_every_s": 4.0}]


def test_status_lists_live_and_recently_gone_processes_and_only_counts_older_ones(fresh_dsn, logins):
    with db.connect(fresh_dsn) as su:
        su.execute("SELECT cronbox.register_process('poller', 'poller:h:1', 'h', 1, 'test')")
        # one that crashed ten minutes ago (worth seeing) and one gone for five hours (only counted)
        su.execute("SELECT cronbox.register_process_at('relay', 'relay:h:2', 'h', 2, 'test', "
                   "p_now => now() - interval '10 minutes')")
        su.execute("SELECT cronbox.register_process_at('relay', 'relay:old:3', 'old', 3, 'test', "
                   "p_now => now() - interval '5 hours')")
    text = _status(logins.dsn(fresh_dsn, "reader"))
    section = text.split("processes:\n", 1)[1].split("\n\n", 1)[0]
    assert "poller:h:1" in section and "relay:h:2" in section, section
    assert "relay:old:3" not in section, section
    assert "... and 1 not seen for over an hour (query cronbox.processes)" in section, section
    doc = orjson.loads(_status(logins.dsn(fresh_dsn, "reader"), "--json"))
    assert {p["name"]: p["live"] for p in doc["processes"]} == {"poller:h:1": True, "relay:h:2": False}
    assert doc["hidden"] == {"processes": 1}


def test_status_json_gives_durations_in_seconds_and_limits_are_checked(fresh_dsn, logins):
    with db.connect(fresh_dsn) as su:
        su.execute("SELECT cronbox.register_process('poller', 'poller:h:1', 'h', 1, 'test', interval '5 seconds', "
                   "'{}'::jsonb)")
    doc = orjson.loads(_status(logins.dsn(fresh_dsn, "admin"), "--json"))
    (poller,) = [p for p in doc["processes"] if p["name"] == "poller:h:1"]
    assert isinstance(poller["uptime"], float) and 0 <= poller["uptime"] < 3600
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "CRONBOX_", "DATABASE_URL"))}
    for bad in ("0", "-1", "x"):
        out = subprocess.run(cronbox_cmd("status", "--limit", bad), env={**env, "DATABASE_URL": fresh_dsn},
                             capture_output=True, text=True, timeout=60)
        assert out.returncode != 0 and "--limit" in out.stderr and out.stdout == "", out


def test_a_worker_role_registers_workers_only(fresh_dsn, logins):
    with db.connect(fresh_dsn) as su:
        poller = su.execute("SELECT cronbox.register_process('poller', 'poller:h:1', 'h', 1, 'test')").fetchone()[0]
        su.commit()
    with db.connect(logins.dsn(fresh_dsn, "worker"), autocommit=True) as conn:
        me = conn.execute("SELECT cronbox.register_worker('worker:h:2', 'h', 2, 'test')").fetchone()[0]
        assert conn.execute("SELECT cronbox.heartbeat_worker(%s, '{\"inflight\": 3}')", (me,)).fetchone()[0]
        assert not conn.execute("SELECT cronbox.heartbeat_worker(%s)", (poller,)).fetchone()[0]
        assert not conn.execute("SELECT cronbox.deregister_worker(%s)", (poller,)).fetchone()[0]
        try:
            conn.execute("SELECT cronbox.register_worker('poller:h:1', 'h', 9, 'test')")
            raise AssertionError("a worker took over a poller's entry")
        except psycopg.errors.ObjectNotInPrerequisiteState:
            pass
        try:
            conn.execute("SELECT cronbox.register_process('poller', 'poller:h:3', 'h', 3, 'test')")
            raise AssertionError("a worker registered a poller")
        except psycopg.errors.InsufficientPrivilege:
            pass
    doc = orjson.loads(_status(logins.dsn(fresh_dsn, "admin"), "--json"))
    kinds = {p["name"]: (p["kind"], p["info"]) for p in doc["processes"]}
    assert kinds["worker:h:2"] == ("worker", {"inflight": 3}) and kinds["poller:h:1"][0] == "poller"
