"""The worker kit's API and CLI without a database: registration, messages, outcomes,
settings, and the one-line errors of `cronbox worker`."""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import given, strategies as st

from cronbox.config import ConfigError
from cronbox.worker import Fail, Retry, Worker
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

    assert w.handlers["a"].default.is_async and not w.handlers["b"].default.is_async
    assert w.handlers["a"].default.enforce_deadline and not w.handlers["b"].default.enforce_deadline
    with pytest.raises(ValueError, match="already has a handler"):
        w.handler("a")(b)
    with pytest.raises(ValueError, match="queue"):
        w.handler("")


def test_handlers_by_job_within_a_queue_then_the_default_then_star() -> None:
    w = Worker()

    @w.handler("reports")
    def default(run):
        return "default"

    @w.handler("reports", job="nightly")
    def nightly(run):
        return "nightly"

    @w.handler("mail", job="digest")
    def digest(run):
        return "digest"

    @w.handler("*")
    def anything(run):
        return "star"

    def handled_by(queue: str, job: str):
        run = Run(run_id=1, job=job, queue=queue, payload={}, fire_at=None, attempt=1, deadline=None,
                  idempotency_key="1:1")
        route = w.handlers.get(queue) or w.handlers["*"]
        return route.resolve(run).fn(run)

    assert handled_by("reports", "nightly") == "nightly"
    assert handled_by("reports", "hourly") == "default"
    assert handled_by("mail", "digest") == "digest"
    assert handled_by("mail", "welcome") == "star"  # a queue with job handlers only falls back to '*'
    assert handled_by("other", "x") == "star"
    with pytest.raises(ValueError, match="job 'nightly' of queue 'reports' already has a handler"):
        w.handler("reports", job="nightly")(default)
    with pytest.raises(ValueError, match="job"):
        w.handler("reports", job="")
    alone = Worker()
    alone.handler("mail", job="digest")(digest)
    run = Run(run_id=2, job="welcome", queue="mail", payload={}, fire_at=None, attempt=1, deadline=None,
              idempotency_key="2:1")
    with pytest.raises(Fail, match="no handler for job 'welcome' in queue 'mail'") as caught:
        alone.handlers["mail"].resolve(run).fn(run)
    assert not caught.value.retryable


def _run() -> Run:
    return Run(run_id=3, job="j", queue="q", payload={}, fire_at=None, attempt=1, deadline=None,
               idempotency_key="3:1")


def test_a_retry_policy_calls_the_handler_again_for_the_exceptions_it_names() -> None:
    w = Worker()
    calls: list[int] = []

    @w.handler("q", retry=Retry(tries=3, backoff=0, jitter=0, on=ConnectionError))
    def flaky(run):
        calls.append(run.tries)
        if run.tries < 3:
            raise ConnectionError("refused")
        return {"tries": run.tries}

    run = _run()
    assert w.handlers["q"].resolve(run).fn(run) == {"tries": 3} and calls == [1, 2, 3]

    @w.handler("q", job="wrong", retry=Retry(tries=5, backoff=0, jitter=0, on=ConnectionError))
    def wrong(run):
        calls.append(run.tries)
        raise ValueError("not retried")

    calls.clear()
    with pytest.raises(ValueError):
        w.handlers["q"].jobs["wrong"].fn(run := _run())
    assert calls == [1] and run.tries == 1

    @w.handler("q", job="never", retry=Retry(tries=4, backoff=0, jitter=0))
    def never(run):
        calls.append(run.tries)
        raise Fail("bad payload", retryable=False)

    calls.clear()
    with pytest.raises(Fail):
        w.handlers["q"].jobs["never"].fn(_run())
    assert calls == [1]


async def test_a_retry_policy_applies_to_async_handlers_and_stops_on_cancel() -> None:
    w = Worker()

    @w.handler("q", retry=Retry(tries=4, backoff=0, jitter=0))
    async def always(run):
        if run.tries == 2:
            run._cancel("cancel")  # e.g. cronbox.cancel arrived while it ran
        raise RuntimeError(f"try {run.tries}")

    run = _run()
    with pytest.raises(RuntimeError, match="try 2"):
        await w.handlers["q"].default.fn(run)
    assert run.tries == 2
    o = Outcome.from_exception(RuntimeError("try 2"), tries=run.tries)
    assert o.error.startswith("RuntimeError: try 2 (after 2 tries in the worker)")


@pytest.mark.parametrize("bad", [dict(tries=1), dict(tries=101), dict(backoff=-1), dict(backoff=5, max_backoff=1),
                                 dict(on=()), dict(on=int)])
def test_a_retry_policy_is_checked_when_declared(bad) -> None:
    with pytest.raises(ValueError, match="Retry"):
        Retry(**bad)


def test_exceptions_become_bounded_failures_with_their_traceback() -> None:
    assert Outcome.from_exception(Fail("nope", retryable=False)) == Outcome("failed", error="nope", retryable=False)
    o = Outcome.from_exception(ValueError("x" * 100_000))
    assert o.retryable and o.error.startswith("ValueError: xxx") and len(o.error) <= ERROR_LIMIT
    assert o.error.splitlines()[0].endswith("...[truncated]")
    assert Outcome.from_exception(KeyError()).error == "KeyError"

    def deep(n: int) -> None:  # a long traceback: 200 chained causes
        try:
            if n:
                deep(n - 1)
            raise OSError("disk")
        except (OSError, RuntimeError) as exc:
            raise RuntimeError("kaboom") from exc

    try:
        deep(200)
    except RuntimeError as exc:
        raised = exc
    o = Outcome.from_exception(raised)
    lines = o.error.splitlines()
    assert lines[0] == "RuntimeError: kaboom" and lines[2] != "Traceback (most recent call last):"
    assert len(o.error) <= ERROR_LIMIT and "characters of the traceback cut" in lines[2]
    assert lines[-1] == "RuntimeError: kaboom" and "in deep" in lines[-3]  # the raising frame is kept
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
