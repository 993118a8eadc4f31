"""The worker kit in push mode (`cronbox worker ... --port PORT`) as a real process, fed by the
real relay or by signed requests the test sends itself (a relay re-sending after a crash)."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from pathlib import Path

import orjson
import pytest

from cronbox.signing import HEADER, sign

from .procs import Proc, wait_until
from .worker_support import autocommit, enqueue, executions, kit, runs, wait_states

FINAL = {"succeeded", "failed", "cancelled", "lost"}
SECRET = "kit-test-secret"


def post(port: int, body: bytes, signature: str | None) -> tuple[int, object]:
    headers = {"Content-Type": "application/json"}
    if signature is not None:
        headers[HEADER] = signature
    req = urllib.request.Request(f"http://127.0.0.1:{port}/run", data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, orjson.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, orjson.loads(exc.read())


def message(conn, run_id: int) -> bytes:
    # the message the relay's claim sends: a run's outbox row carries none, it is built from the
    # row's own columns (the run in flight)
    return conn.execute(
        "SELECT cronbox.run_message(o.outbox_id, o.job_name, o.queue, o.payload, o.fire_at, o.attempt)::text "
        "FROM cronbox.outbox o WHERE o.outbox_id = %s AND o.kind = 'run'",
        (run_id,)).fetchone()[0].encode()


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


def start_kit(dsn: str, tmp: Path, **env: str):
    proc, port, log = kit(dsn, tmp, http=True, CRONBOX_WORKER_SECRET=SECRET, **env)
    wait_until(lambda: ready(port) or proc.popen.poll() is not None, 20, "worker listening")
    assert proc.popen.poll() is None, proc.output
    return proc, port, log


def test_push_worker_behind_the_relay_completes_short_and_long_runs(fresh_dsn: str, tmp_path: Path) -> None:
    with autocommit(fresh_dsn) as conn:
        quick = enqueue(conn, 20, "ok", payload={"p": 1})
        slow = enqueue(conn, 2, "sleep", payload={"seconds": 1.5})
        proc, port, log = start_kit(fresh_dsn, tmp_path, CRONBOX_WORKER_REPLY_WITHIN="300ms")
        sinks = (f"ok=http://127.0.0.1:{port}/run batch=5 secret_env=KIT_SECRET;"
                 f"sleep=http://127.0.0.1:{port}/run secret_env=KIT_SECRET")
        with proc, Proc("relay", fresh_dsn, tmp_path, CRONBOX_SINKS=sinks, KIT_SECRET=SECRET):
            rows = wait_states(conn, quick + slow, FINAL, proc=proc)
            assert {r[1] for r in rows} == {"succeeded"}
            by_id = {r[0]: r for r in rows}
            assert all(by_id[i][3]["echo"] == {"p": 1} for i in quick)
            assert all(by_id[i][3] == {"slept": 1.5} for i in slow)
            assert proc.terminate() == 0
        assert sorted(executions(log)) == sorted([f"ok {i}:1" for i in quick] + [f"sleep {i}:1" for i in slow])


def test_push_worker_declares_batches_and_the_default_route_sends_them(fresh_dsn: str, tmp_path: Path) -> None:
    with autocommit(fresh_dsn) as conn:
        first = enqueue(conn, 1, "ok")
        proc, port, log = start_kit(fresh_dsn, tmp_path, CRONBOX_WORKER_CONCURRENCY="7")
        body = message(conn, first[0])
        req = urllib.request.Request(f"http://127.0.0.1:{port}/run", data=body, method="POST",
                                     headers={"Content-Type": "application/json", HEADER: sign(SECRET.encode(), body)})
        with urllib.request.urlopen(req, timeout=30) as resp:  # the batch size is min(batch 100, concurrency 7)
            assert resp.headers["Cronbox-Accept-Batch"] == "7"
        sinks = f"ok=http://127.0.0.1:{port}/run secret_env=KIT_SECRET"  # batch=auto, the default
        with proc, Proc("relay", fresh_dsn, tmp_path, CRONBOX_SINKS=sinks, KIT_SECRET=SECRET) as relay:
            wait_states(conn, first, FINAL, proc=proc)  # the relay's copy is a duplicate the kit drops
            more = enqueue(conn, 14, "ok")
            rows = wait_states(conn, more, FINAL, proc=proc)
            assert {r[1] for r in rows} == {"succeeded"}
            assert proc.terminate() == 0
            assert "sink declares batches" in relay.output and "batch=7" in relay.output
        assert sorted(executions(log)) == sorted(f"ok {i}:1" for i in first + more)


def test_push_worker_refuses_forged_stale_and_unsigned_requests(fresh_dsn: str, tmp_path: Path) -> None:
    with autocommit(fresh_dsn) as conn:
        [run_id] = enqueue(conn, 1, "ok")
        body = message(conn, run_id)
        proc, port, log = start_kit(fresh_dsn, tmp_path)
        with proc:
            forged = [
                None,                                                   # unsigned
                sign("not-the-secret", body),                           # wrong secret
                sign(SECRET, body, timestamp=int(time.time()) - 3600),  # stale: a replay
                sign(SECRET, body.replace(b'"attempt": 1', b'"attempt": 2')),  # signed another body
                "t=abc,v1=00",                                          # malformed
            ]
            for signature in forged:
                status, answer = post(port, body, signature)
                assert status == 401 and "Cronbox-Signature" in answer["error"], (signature, answer)
            assert executions(log) == [] and runs(conn, [run_id])[0][1] == "dispatched"
            status, answer = post(port, body, sign(SECRET, body))
            assert status == 200 and answer["state"] == "succeeded" and answer["result"]["key"] == f"{run_id}:1"
            assert proc.terminate() == 0


def test_push_worker_drops_duplicates_also_after_a_sigkill(fresh_dsn: str, tmp_path: Path) -> None:
    """A relay re-sends after a crash or a lost answer, with the same idempotency key: the kit
    runs each handler once. In memory it replays the outcome it answered; after a restart the
    database says the run is done (start_run refuses it) and the message is dropped."""
    with autocommit(fresh_dsn) as conn:
        [short] = enqueue(conn, 1, "ok")
        [long] = enqueue(conn, 1, "sleep", payload={"seconds": 1})
        short_body, long_body = message(conn, short), message(conn, long)
        proc, port, log = start_kit(fresh_dsn, tmp_path, CRONBOX_WORKER_REPLY_WITHIN="200ms")
        with proc:
            first = post(port, short_body, sign(SECRET, short_body))
            assert first[0] == 200 and first[1]["state"] == "succeeded"
            assert post(port, short_body, sign(SECRET, short_body)) == first, "the same outcome, not a second run"
            assert post(port, long_body, sign(SECRET, long_body)) == (202, {"accepted": True})
            status, answer = post(port, long_body, sign(SECRET, long_body))
            assert status == 200 and answer["duplicate"] is True
            assert wait_states(conn, [long], FINAL, proc=proc)[0][1] == "succeeded"  # reported through SQL
            proc.kill()
        assert executions(log) == [f"ok {short}:1", f"sleep {long}:1"]
        # The relay would have completed `short` from the answer; do it as its ack would.
        conn.execute("SELECT cronbox.complete_run(%s, %s)", (short, orjson.dumps(first[1]["result"]).decode()))
        proc, port, log = start_kit(fresh_dsn, tmp_path)
        with proc:
            for body in (short_body, long_body):
                status, answer = post(port, body, sign(SECRET, body))
                assert status == 200 and answer["duplicate"] is True
            assert executions(log) == [], "a restarted worker runs nothing twice"
            assert proc.terminate() == 0


@pytest.mark.slow
def test_push_sigkill_mid_run_is_rescued_by_the_lease(fresh_dsn: str, tmp_path: Path) -> None:
    with autocommit(fresh_dsn) as conn, Proc("poller", fresh_dsn, tmp_path, CRONBOX_REAP_INTERVAL="200ms"):
        ids = enqueue(conn, 3, "sleep", payload={"seconds": 1}, timeout="2 seconds", max_attempts=2,
                      retry_delay="1 second")
        proc, port, log = start_kit(fresh_dsn, tmp_path, CRONBOX_WORKER_REPLY_WITHIN="100ms")
        sinks = f"sleep=http://127.0.0.1:{port}/run secret_env=KIT_SECRET"
        with Proc("relay", fresh_dsn, tmp_path, CRONBOX_SINKS=sinks, KIT_SECRET=SECRET):
            with proc:
                wait_until(lambda: len(executions(log)) == 3, 20, "three runs in flight")
                proc.kill()
            assert [r[1] for r in wait_states(conn, ids, FINAL, timeout=20)] == ["lost"] * 3
            proc, _, log2 = kit(fresh_dsn, tmp_path, http=True, port=port, CRONBOX_WORKER_SECRET=SECRET)
            with proc:
                wait_until(lambda: conn.execute("SELECT count(*) FROM cronbox.runs WHERE attempt = 2").fetchone()[0] == 3,
                           20, "three retries")
                retries = [r[0] for r in conn.execute("SELECT run_id FROM cronbox.runs WHERE attempt = 2").fetchall()]
                assert [r[1] for r in wait_states(conn, retries, FINAL, proc=proc)] == ["succeeded"] * 3
                assert proc.terminate() == 0
        assert len(executions(log2)) == 3


def test_push_sigterm_finishes_accepted_runs_before_exiting(fresh_dsn: str, tmp_path: Path) -> None:
    with autocommit(fresh_dsn) as conn:
        ids = enqueue(conn, 2, "sleep", payload={"seconds": 1.5})
        proc, port, log = start_kit(fresh_dsn, tmp_path, CRONBOX_WORKER_REPLY_WITHIN="100ms")
        with proc:
            for i in ids:
                body = message(conn, i)
                assert post(port, body, sign(SECRET, body)) == (202, {"accepted": True})
            assert proc.terminate(timeout=30) == 0
        assert [r[1] for r in runs(conn, ids)] == ["succeeded"] * 2, "reported through SQL before exit"
        assert sorted(executions(log, "done")) == sorted(f"sleep {i}:1" for i in ids)


def test_push_cancel_reaches_a_running_handler(fresh_dsn: str, tmp_path: Path) -> None:
    with autocommit(fresh_dsn) as conn:
        [run_id] = enqueue(conn, 1, "cooperative", payload={"seconds": 60}, timeout="3 seconds")
        proc, port, log = start_kit(fresh_dsn, tmp_path, CRONBOX_WORKER_REPLY_WITHIN="100ms")
        with proc:
            body = message(conn, run_id)
            assert post(port, body, sign(SECRET, body)) == (202, {"accepted": True})
            assert conn.execute("SELECT cronbox.cancel(%s)", (run_id,)).fetchone()[0] == "cancel_requested"
            assert wait_states(conn, [run_id], FINAL, timeout=15, proc=proc)[0][1] == "cancelled"
            assert executions(log, "cancelled=True") == [f"cooperative {run_id}:1"]
            assert proc.terminate() == 0


@pytest.mark.slow
def test_worker_that_cannot_reach_the_database_gets_its_messages_back_without_backoff(
        fresh_dsn: str, tmp_path: Path, pg) -> None:
    """The kit answers 503 `Cronbox-Retry-Reason: database-unavailable` at once when it cannot
    start a run for want of the database (a restart, a failover); the relay hands those rows
    back without counting an attempt or backing off: with 2 attempts and a 1 h backoff, the runs
    still go out as soon as the worker reaches the database again."""
    import psycopg

    role = f"kit_{abs(hash(tmp_path)) % 10**8}"
    with autocommit(pg.admin_dsn) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN SUPERUSER")
    try:
        worker_dsn = psycopg.conninfo.make_conninfo(fresh_dsn, user=role)
        with autocommit(fresh_dsn) as conn:
            proc, port, log = start_kit(worker_dsn, tmp_path)
            with proc:
                with autocommit(pg.admin_dsn) as admin:  # the worker loses the database
                    admin.execute(f"ALTER ROLE {role} NOLOGIN")
                    admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,))
                ids = enqueue(conn, 3, "ok")
                relay = Proc("relay", fresh_dsn, tmp_path, CRONBOX_SINKS=f"ok=http://127.0.0.1:{port}/run secret_env=S",
                             S=SECRET, CRONBOX_RELAY_MAX_ATTEMPTS="2", CRONBOX_RELAY_BACKOFF="1h",
                             CRONBOX_RELAY_BACKOFF_MAX="1h")
                with relay:
                    wait_until(lambda: relay.output.count("worker cannot reach the database") >= 3, 60,
                               "the relay handing messages back three times")
                    assert "sends failed" not in relay.output, relay.output
                    assert conn.execute("SELECT count(*) FROM cronbox.dead_letter").fetchone()[0] == 0
                    with autocommit(pg.admin_dsn) as admin:  # the database is back for the worker
                        admin.execute(f"ALTER ROLE {role} LOGIN")
                    rows = wait_states(conn, ids, FINAL, timeout=30, proc=proc)
                    assert {r[1] for r in rows} == {"succeeded"}, rows
                    assert relay.terminate() == 0
                assert proc.terminate() == 0
            assert sorted(executions(log)) == sorted(f"ok {i}:1" for i in ids)
    finally:
        with autocommit(pg.admin_dsn) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,))
            admin.execute(f"DROP ROLE IF EXISTS {role}")


def test_oversized_or_unsigned_bodies_are_refused_before_they_are_read(fresh_dsn: str, tmp_path: Path) -> None:
    """Only the headers are sent: the answer comes without the body, so an attacker's 63 MB
    POSTs cost the worker nothing; a signed body past the limit is refused too."""
    import socket

    def headers_only(port: int, length: int, signature: str | None) -> bytes:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            extra = f"{HEADER}: {signature}\r\n" if signature else ""
            sock.sendall(f"POST /run HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         f"Content-Length: {length}\r\n{extra}\r\n".encode())
            return sock.recv(65536)

    proc, port, _ = start_kit(fresh_dsn, tmp_path, CRONBOX_WORKER_MAX_BODY="4096")
    with proc:
        assert headers_only(port, 63 * 2**20, None).startswith(b"HTTP/1.1 413")
        assert headers_only(port, 1000, None).startswith(b"HTTP/1.1 401")
        stale = sign(SECRET, b"{}", timestamp=int(time.time()) - 3600)
        assert headers_only(port, 1000, stale).startswith(b"HTTP/1.1 401")
        big = b'{"pad": "' + b"x" * 10_000 + b'"}'
        assert post(port, big, sign(SECRET, big))[0] == 413
        huge = b'{"run_id": 1, "payload": {"x": 1e400}}'
        status, answer = post(port, huge, sign(SECRET, huge))
        assert status == 400 and "number is infinity" in answer["error"], answer
        assert proc.terminate() == 0
