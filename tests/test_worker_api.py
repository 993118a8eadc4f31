"""The worker kit's API and CLI without a database: registration, messages, outcomes,
settings, and the one-line errors of `cronbox worker`."""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import given, strategies as st

from cronbox.config import ConfigError
from cronbox.worker import Fail, Worker
from cronbox.worker.run import MessageError, Outcome, Run
from cronbox.worker.settings import ERROR_LIMIT, WorkerSettings

from .conftest import cronbox_cmd


def test_one_handler_per_queue_sync_or_async() -> None:
    w = Worker()

    @w.handler("a")
    async def a(run):
        return 1

    @w.handler("b", enforce_deadline=False)
    def b(run):
        return 2

    assert w.handlers["a"].is_async and not w.handlers["b"].is_async
    assert w.handlers["a"].enforce_deadline and not w.handlers["b"].enforce_deadline
    with pytest.raises(ValueError, match="already has a handler"):
        w.handler("a")(b)
    with pytest.raises(ValueError, match="queue"):
        w.handler("")


def test_exceptions_become_bounded_failures() -> None:
    assert Outcome.from_exception(Fail("nope", retryable=False)) == Outcome("failed", error="nope", retryable=False)
    o = Outcome.from_exception(ValueError("x" * 100_000))
    assert o.retryable and o.error.startswith("ValueError: xxx") and len(o.error) == ERROR_LIMIT
    assert o.error.endswith("...[truncated]")
    assert Outcome.from_exception(KeyError()).error == "KeyError"
    bad = Outcome.succeeded({"when": object()})
    assert bad.state == "failed" and not bad.retryable and "not JSON" in bad.error
    assert Outcome.succeeded({"n": 1}).answer() == {"state": "succeeded", "result": {"n": 1}}


def test_messages_from_the_relay_become_runs() -> None:
    run = Run.from_message({"run_id": 7, "job": "j", "queue": "q", "payload": {"a": 1},
                            "fire_at": "2026-01-01T00:00:00+00:00", "attempt": 2,
                            "deadline": "2026-01-01T00:05:00.5+00:00", "idempotency_key": "7:2"})
    assert (run.run_id, run.attempt, run.idempotency_key, run.payload) == (7, 2, "7:2", {"a": 1})
    assert run.deadline is not None and run.deadline.utcoffset() is not None
    assert not run.cancelled.is_set()


@given(st.one_of(st.none(), st.integers(), st.text(max_size=50), st.lists(st.integers(), max_size=3),
                 st.dictionaries(st.sampled_from(["run_id", "attempt", "fire_at", "deadline"]),
                                 st.one_of(st.none(), st.text(max_size=20), st.booleans(), st.floats()), max_size=4)))
def test_malformed_messages_are_refused_with_the_field_named(doc) -> None:
    try:
        run = Run.from_message(doc)
    except MessageError as exc:
        assert str(exc).split(":")[0] in ("message", "run_id", "attempt", "fire_at", "deadline")
    else:
        assert isinstance(run.run_id, int)


def test_settings_validate_and_hide_secrets() -> None:
    s = WorkerSettings.load({}, env={"CRONBOX_WORKER_CONCURRENCY": "3", "CRONBOX_WORKER_HEARTBEAT": "500ms",
                                     "CRONBOX_WORKER_SECRET": "hunter22", "DATABASE_URL": "postgresql://u:pw@h/db"})
    assert (s.concurrency, s.threads, s.heartbeat, s.secret) == (3, 3, 0.5, "hunter22")
    shown = str(s.describe())
    assert "hunter22" not in shown and "pw@" not in shown
    assert WorkerSettings.load({"concurrency": 9}, env={"CRONBOX_WORKER_CONCURRENCY": "3"}).concurrency == 9
    for env in ({"CRONBOX_WORKER_CONCURRENCY": "0"}, {"CRONBOX_WORKER_HEARTBEAT": "soon"},
                {"CRONBOX_WORKER_BATCH": "-1"}):
        with pytest.raises(ConfigError, match="CRONBOX_WORKER_"):
            WorkerSettings.load({}, env=env)
    with pytest.raises(ConfigError, match="reply_within"):
        WorkerSettings.load({"reply_within": 0}, env={})
    with pytest.raises(TypeError, match="bogus"):
        WorkerSettings.load({"bogus": 1}, env={})


def test_push_app_needs_a_secret_unless_unsigned_is_asked_for() -> None:
    w = Worker(secret=None)

    @w.handler("q")
    async def h(run):
        return None

    w._settings = WorkerSettings.load({}, env={})
    with pytest.raises(ConfigError, match="CRONBOX_WORKER_SECRET"):
        w.http_app()
    assert w.http_app(allow_unsigned=True) is not None
    assert w.http_app(secret="s") is not None


@pytest.mark.parametrize("spec, message", [
    ("no_such_module:worker", "cannot import 'no_such_module'"),
    ("tests.worker_apps:nothing", "has no attribute 'nothing'"),
    ("tests.worker_apps:record", "not a cronbox.worker.Worker"),
    ("tests.worker_apps", "expected module:attribute"),
])
def test_cronbox_worker_refuses_a_bad_target_in_one_line(spec: str, message: str) -> None:
    out = subprocess.run(cronbox_cmd("worker", spec), capture_output=True, text=True, timeout=60,
                         env={"DATABASE_URL": "postgresql://127.0.0.1:1/none", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 1
    assert out.stderr.strip().count("\n") == 0 and message in out.stderr, out.stderr


def test_cronbox_worker_push_mode_without_a_secret_exits_1() -> None:
    out = subprocess.run(cronbox_cmd("worker", "tests.worker_apps:worker", "--http", "1"), capture_output=True,
                         text=True, timeout=60, env={"DATABASE_URL": "postgresql://127.0.0.1:1/none", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 1 and "CRONBOX_WORKER_SECRET" in out.stderr, out.stderr


def test_a_result_too_large_fails_the_run_not_retryable() -> None:
    o = Outcome.succeeded({"blob": "x" * 1_100_000})
    assert o.state == "failed" and not o.retryable and o.error.startswith("result too large")
