"""A job's own recipients (schedule(..., notify => ...)): its events reach them as outbox rows on
cronbox.mail / cronbox.webhooks, besides cronbox.notifications, and repeated events within the
window become one digest with a count (the relay's mail sink: test_relay_mail.py)."""

from __future__ import annotations

from datetime import timedelta

from psycopg.types.json import Jsonb

from .runs_support import active, at, dispatch, fail, future, job, notifications


def stakeholder_rows(conn) -> list[dict]:
    cur = conn.execute("SELECT queue, message, available_at FROM cronbox.outbox "
                       "WHERE queue IN ('cronbox.mail', 'cronbox.webhooks') ORDER BY outbox_id")
    return [{"queue": q, "available_at": a, **m} for q, m, a in cur.fetchall()]


def failing_job(conn, name: str, notify: list[str] | None, **opts) -> None:
    job(conn, name, notify=notify, overlap="allow", **opts)


def fail_once(conn, name: str, t: float) -> None:
    future(conn, name, t)
    dispatch(conn, t)
    fail(conn, active(conn, name)[-1], t, "disk full")


def test_a_failure_reaches_each_recipient_of_the_job_and_the_global_route(conn):
    failing_job(conn, "etl", ["mailto:team@example.com", "https://hooks.example/etl"])
    failing_job(conn, "quiet", None)
    fail_once(conn, "etl", 0)
    fail_once(conn, "quiet", 0)
    assert [n["job"] for n in notifications(conn, "run_failed")] == ["etl", "quiet"]
    rows = stakeholder_rows(conn)
    assert [(r["queue"], r["to"], r["event"], r["count"]) for r in rows] == [
        ("cronbox.mail", "mailto:team@example.com", "run_failed", 1),
        ("cronbox.webhooks", "https://hooks.example/etl", "run_failed", 1)]
    assert rows[0]["events"][0]["error"] == "disk full" and rows[0]["available_at"] == at(0)


def test_repeated_failures_within_the_window_become_one_digest_with_a_count(conn):
    failing_job(conn, "etl", ["mailto:team@example.com"])
    fail_once(conn, "etl", 0)
    # the first message was sent (acked: gone from the outbox)
    conn.execute("DELETE FROM cronbox.outbox WHERE queue = 'cronbox.mail'")
    for t in range(1, 31):
        fail_once(conn, "etl", t)
    (digest,) = stakeholder_rows(conn)
    assert digest["count"] == 30 and len(digest["events"]) == 10
    assert digest["available_at"] == at(600)  # the end of the first message's window
    assert digest["events"][-1]["fire_at"] == at(30).isoformat()
    # after the window, a failure goes at once again
    conn.execute("DELETE FROM cronbox.outbox WHERE queue = 'cronbox.mail'")
    fail_once(conn, "etl", 1300)
    (again,) = stakeholder_rows(conn)
    assert again["count"] == 1 and again["available_at"] == at(1300)


def test_unavailable_and_dependency_timeout_reach_the_recipients(conn):
    conn.execute("SELECT cronbox.set_pool('gpu', 0)")
    job(conn, "train", needs=Jsonb({"gpu": 1}), on_unavailable="fail", notify=["https://hooks.example/ml"])
    future(conn, "train", 0)
    dispatch(conn, 1)
    assert [r["event"] for r in stakeholder_rows(conn)] == ["unavailable"]
    assert stakeholder_rows(conn)[0]["events"][0]["pool"] == "gpu"


def test_a_window_of_zero_sends_every_event(conn):
    conn.execute("SET LOCAL cronbox.notify_window = '0'")
    failing_job(conn, "etl", ["mailto:team@example.com"])
    for t in range(3):
        fail_once(conn, "etl", t)
    assert [r["count"] for r in stakeholder_rows(conn)] == [1, 1, 1]
