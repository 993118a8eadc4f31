"""Operating the real processes: they run as a plain login role holding only cronbox_process,
serve /metrics and /healthz, count what they do, and never log a secret."""

from __future__ import annotations

import re
import urllib.error
import urllib.request

import orjson
from psycopg import sql

from cronbox import db
from cronbox.pgcluster import free_port

from .procs import Proc, wait_until
from .roles import PASSWORD, logins  # noqa: F401  (fixture)

HMAC_SECRET = "hmac-Sekr1t-value"
URL_PASSWORD = "urlPassw0rd-xyz"


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError as exc:
        return 0, str(exc)


def _value(text: str, name: str, **labels: str) -> float:
    """The value of one sample in Prometheus text format (0 when absent)."""
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][\w:]*)(\{(.*)\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        if all(got.get(k) == v for k, v in labels.items()):
            return float(m.group(4))
    return 0.0


def _metric(port: int, name: str, **labels: str) -> float:
    status, text = _get(port, "/metrics")
    return _value(text, name, **labels) if status == 200 else 0.0


def test_poller_and_relay_as_a_process_login_serve_metrics_that_move(fresh_dsn, logins, tmp_path):
    with logins.connect(fresh_dsn, "admin") as admin:
        admin.execute("SELECT cronbox.schedule('tick', cron => '* * * * * *', payload => '{\"n\": 1}', "
                      "overlap => 'allow')")  # the log sink never completes runs
        admin.execute("SELECT cronbox.schedule('held', every => '1 hour')")
    with db.connect(fresh_dsn) as su:  # a paused schedule for the gauge
        su.execute("UPDATE cronbox.job SET paused = true WHERE name = 'held'")
    dsn = logins.dsn(fresh_dsn, "process")
    pport, rport = free_port(), free_port()
    common = {"CRONBOX_LOG_FORMAT": "json", "CRONBOX_HMAC_SECRET": HMAC_SECRET,
              "CRONBOX_SINKS": f"default=log;other=http://hook:{URL_PASSWORD}@127.0.0.1:9/run"}
    with Proc("poller", dsn, tmp_path, CRONBOX_METRICS_PORT=str(pport), **common) as poller, \
            Proc("relay", dsn, tmp_path, CRONBOX_METRICS_PORT=str(rport), **common) as relay:
        wait_until(lambda: _get(pport, "/healthz")[0] == 200 and _get(rport, "/healthz")[0] == 200,
                   timeout=30, what="both /healthz 200")
        wait_until(lambda: _metric(pport, "cronbox_runs_dispatched_total", queue="default") >= 1,
                   timeout=30, what="dispatched counter")
        wait_until(lambda: _metric(rport, "cronbox_messages_total", queue="default", sink="log",
                                   outcome="delivered") >= 1, timeout=30, what="delivered counter")
        first = {
            "fires": _metric(pport, "cronbox_fires_materialised_total"),
            "dispatched": _metric(pport, "cronbox_runs_dispatched_total", queue="default"),
            "delivered": _metric(rport, "cronbox_messages_total", queue="default", sink="log", outcome="delivered"),
            "ticks": _metric(rport, "cronbox_loop_ticks_total", process="relay"),
        }
        # counters move: a cron job every second keeps feeding both processes
        wait_until(lambda: _metric(pport, "cronbox_runs_dispatched_total", queue="default") > first["dispatched"]
                   and _metric(rport, "cronbox_messages_total", queue="default", sink="log",
                               outcome="delivered") > first["delivered"],
                   timeout=30, what="counters moving")
        assert _metric(pport, "cronbox_fires_materialised_total") >= first["fires"] > 0
        assert _metric(rport, "cronbox_loop_ticks_total", process="relay") > first["ticks"]
        _, ptext = _get(pport, "/metrics")
        _, rtext = _get(rport, "/metrics")
        assert _value(ptext, "cronbox_dispatch_lag_seconds_count", queue="default") >= 1
        assert _value(ptext, "cronbox_schedules_paused") == 1
        assert _value(rtext, "cronbox_delivery_latency_seconds_count", sink="log") >= 1
        for name in ("cronbox_outbox_depth", "cronbox_outbox_oldest_age_seconds", "cronbox_runs_active",
                     "cronbox_runs_not_run_total", "cronbox_runs_lost_total", "cronbox_db_errors_total",
                     "cronbox_db_reconnects_total", "cronbox_send_duration_seconds_count"):
            assert name in ptext + rtext, name
        assert URL_PASSWORD not in ptext + rtext
        assert relay.terminate() == 0, relay.output
        assert poller.terminate() == 0, poller.output
        outputs = poller.output + relay.output

    lines = [orjson.loads(line) for line in outputs.splitlines() if line.strip()]
    starting = [ln for ln in lines if ln["msg"] == "starting"]
    assert len(starting) == 2  # effective configuration logged at start
    for ln in starting:
        assert "password=***" in ln["dsn"], ln["dsn"]
        assert "poll_interval" in ln and "metrics_port" in ln
    assert all({"ts", "level", "logger", "msg"} <= set(ln) for ln in lines)
    delivered = [ln for ln in lines if ln["msg"] == "message"]
    assert delivered and all(isinstance(ln["run_id"], int) and ln["job"] == "tick" for ln in delivered)
    for secret in (PASSWORD, HMAC_SECRET, URL_PASSWORD):
        assert secret not in outputs


def test_healthz_fails_while_the_database_is_unreachable_and_recovers(fresh_dsn, logins, tmp_path, pg):
    dbname = psycopg_dbname(fresh_dsn)
    dsn = logins.dsn(fresh_dsn, "process")
    port = free_port()
    with Proc("relay", dsn, tmp_path, CRONBOX_METRICS_PORT=str(port), CRONBOX_SINKS="*=log",
              CRONBOX_HEALTH_STALE="3s") as relay:
        wait_until(lambda: _get(port, "/healthz")[0] == 200, timeout=30, what="/healthz 200")
        with db.connect(pg.admin_dsn) as su:
            su.execute(sql.SQL("REVOKE CONNECT ON DATABASE {} FROM PUBLIC").format(sql.Identifier(dbname)))
            su.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s AND datname = %s",
                       (logins.name("process"), dbname))
        try:
            status, body = wait_until(lambda: (s := _get(port, "/healthz"))[0] == 503 and s, timeout=30,
                                      what="/healthz 503")
            assert "database unreachable" in body or "ticked" in body, body
            wait_until(lambda: _metric(port, "cronbox_db_reconnects_total") >= 1, timeout=30, what="reconnect counted")
        finally:
            with db.connect(pg.admin_dsn) as su:
                su.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO PUBLIC").format(sql.Identifier(dbname)))
        wait_until(lambda: _get(port, "/healthz")[0] == 200, timeout=60, what="/healthz 200 again")
        assert relay.terminate() == 0, relay.output
        assert PASSWORD not in relay.output


def psycopg_dbname(dsn: str) -> str:
    from psycopg.conninfo import conninfo_to_dict

    return str(conninfo_to_dict(dsn)["dbname"])
