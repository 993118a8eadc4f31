"""The relay's mail sink against a real SMTP server (aiosmtpd on 127.0.0.1, STARTTLS required,
LOGIN over TLS only): a job's failure reaches its `notify => ARRAY['mailto:...']` recipient; a
refused recipient is dead-lettered, a server that says "later" is retried; the route never logs
the password. Webhook recipients: tests/test_stakeholders.py (SQL) and the http sink's tests."""

from __future__ import annotations

import ssl
import subprocess
import threading
from email import message_from_bytes
from email.message import Message

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from cronbox import db
from cronbox.config import ConfigError
from cronbox.pgcluster import free_port
from relay.routes import parse_routes

from .procs import Proc, wait_until

PASSWORD = "s3cret-smtp-pass"


class Inbox:
    """aiosmtpd handler: records what it accepts; recipients on `refuse` get 550, those on
    `later` get 451 until `later` is emptied."""

    def __init__(self) -> None:
        self.mails: list[tuple[list[str], Message]] = []
        self.logins: list[str] = []
        self.refuse: set[str] = set()
        self.later: set[str] = set()
        self.tempfails = 0
        self.lock = threading.Lock()

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address in self.refuse:
            return "550 5.1.1 no such user"
        if address in self.later:
            self.tempfails += 1
            return "451 4.3.0 try again later"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        with self.lock:
            self.mails.append((list(envelope.rcpt_tos), message_from_bytes(envelope.content)))
        return "250 Message accepted"

    def authenticate(self, server, session, envelope, mechanism, auth_data) -> AuthResult:
        ok = isinstance(auth_data, LoginPassword) and auth_data.password == PASSWORD.encode()
        if ok:
            self.logins.append(auth_data.login.decode())
        return AuthResult(success=ok, handled=False)


@pytest.fixture
def smtp(tmp_path):
    """A STARTTLS SMTP server with a self-signed certificate for 127.0.0.1; stopped at the end."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    inbox = Inbox()
    port = free_port()
    controller = Controller(inbox, hostname="127.0.0.1", port=port, tls_context=ctx, require_starttls=True,
                            authenticator=inbox.authenticate, auth_require_tls=True, auth_required=True)
    controller.start()
    try:
        yield inbox, port, cert
    finally:
        controller.stop()


def sinks(port: int, cert) -> str:
    return (f"cronbox.mail=smtp://bot@127.0.0.1:{port} from=cronbox@example.com password_env=SMTP_PW "
            f"cafile={cert} timeout=5s;*=log")


def fail_job(conn, name: str, notify: list[str]) -> None:
    conn.execute("SELECT cronbox.schedule(%s, every => '1 hour', notify => %s)", (name, notify))
    conn.execute("SELECT cronbox.trigger(%s)", (name,))
    conn.execute("SELECT * FROM cronbox.dispatch(100)")
    (run_id,) = conn.execute("SELECT run_id FROM cronbox.runs WHERE job = %s", (name,)).fetchone()
    conn.execute("SELECT cronbox.fail_run(%s, 'disk full', false)", (run_id,))


def test_a_failed_job_mails_its_recipient_over_starttls_with_login(fresh_dsn, tmp_path, smtp):
    inbox, port, cert = smtp
    with db.connect(fresh_dsn) as conn:
        fail_job(conn, "etl", ["mailto:team@example.com"])
        fail_job(conn, "bounce", ["mailto:nobody@example.com"])
        fail_job(conn, "slow", ["mailto:later@example.com"])
    inbox.refuse.add("nobody@example.com")
    inbox.later.add("later@example.com")
    env = {"CRONBOX_SINKS": sinks(port, cert), "SMTP_PW": PASSWORD, "CRONBOX_RELAY_BACKOFF": "100ms",
           "CRONBOX_RELAY_BACKOFF_MAX": "200ms", "CRONBOX_POLL_INTERVAL": "100ms",
           "CRONBOX_RELAY_BREAKER_FAILURES": "0"}
    with Proc("relay", fresh_dsn, tmp_path, **env) as relay:
        wait_until(lambda: len(inbox.mails) >= 1 and inbox.tempfails >= 2, what="mail sent, a recipient deferred")
        inbox.later.clear()  # the server accepts it now: the retry goes through
        wait_until(lambda: len(inbox.mails) == 2, what="the deferred mail retried")
        with db.connect(fresh_dsn) as conn:
            wait_until(lambda: conn.execute(
                "SELECT count(*) FROM cronbox.dead_letters WHERE queue = 'cronbox.mail'").fetchone()[0] == 1,
                what="the refused recipient dead-lettered")
            (error,) = conn.execute("SELECT last_error FROM cronbox.dead_letters WHERE queue = 'cronbox.mail'").fetchone()
            assert "550" in error and "nobody@example.com" in error
            assert conn.execute("SELECT count(*) FROM cronbox.outbox WHERE queue = 'cronbox.mail'").fetchone()[0] == 0
        assert relay.terminate() == 0
    assert PASSWORD not in relay.output
    assert inbox.logins and set(inbox.logins) == {"bot"}
    (to, mail), (to2, _) = inbox.mails
    assert to == ["team@example.com"] and to2 == ["later@example.com"]
    assert mail["Subject"] == "[cronbox] etl: run_failed" and mail["From"] == "cronbox@example.com"
    assert mail["Auto-Submitted"] == "auto-generated"
    assert "disk full" in mail.get_payload(decode=True).decode()


def test_mail_routes_are_checked_at_start_and_never_show_the_password():
    env = {"SMTP_PW": PASSWORD}
    route = parse_routes("cronbox.mail=smtp://bot@mail.example.com password_env=SMTP_PW from=a@example.com", env)
    (mail,) = [r for r in route.describe() if r.startswith("cronbox.mail")]
    assert PASSWORD not in mail and PASSWORD not in repr(route.target("cronbox.mail"))
    assert route.target("cronbox.mail").target.port == 587 and route.target("cronbox.mail").target.tls == "starttls"
    # never by the default route; the log sink when not routed
    assert parse_routes("*=http://w/run").target("cronbox.mail").kind == "log"
    assert parse_routes("*=http://w/run").target("cronbox.webhooks").kind == "log"
    assert parse_routes("cronbox.webhooks=webhook secret_env=SMTP_PW", env).target("cronbox.webhooks").kind == "webhook"
    for bad in ["cronbox.mail=smtp://bot@mail.example.com",          # a user and no password
                "cronbox.mail=smtp://bot:pw@mail.example.com password_env=SMTP_PW",  # a password in the URL
                "cronbox.mail=smtp://mail.example.com from=not-an-address",
                "cronbox.mail=smtp://mail.example.com starttls=maybe",
                "cronbox.mail=smtp://mail.example.com nope=1"]:
        with pytest.raises(ConfigError, match="CRONBOX_SINKS: cronbox.mail"):
            parse_routes(bad, env)
