"""Secrets never reach the logs; the migrate refuses an unclassified function."""

from __future__ import annotations

import io
import logging
import shutil
from pathlib import Path

import orjson
import pytest

from cronbox import db, log as cblog
from cronbox.config import Config, redact, secret_values
from poller.settings import PollerSettings
from relay.settings import RelaySettings
from cronbox.migrate import MigrateError, migrate, sql_root


@pytest.mark.parametrize("text, secret", [
    ("postgresql://app:pa55word@db:5432/app", "pa55word"),
    ("host=db password=pa55word dbname=app", "pa55word"),
    ("host=db password='pa 55word' dbname=app", "pa 55word"),
    ("default=https://hook:tok3n@example.com/run;x=log", "tok3n"),
    ('{"hmac_secret": "s3cr3t-hmac", "n": 1}', "s3cr3t-hmac"),
    ("https://example.com/run?api_key=k3y-value&x=1", "k3y-value"),
    ("CRONBOX_SINK_SECRET=abc123def", "abc123def"),
])
def test_redact_hides_secret_looking_values(text, secret):
    assert secret not in redact(text)
    assert "***" in redact(text)


def test_secret_values_come_from_the_dsn_and_secret_looking_variables():
    env = {"DATABASE_URL": "postgresql://u:dbpw-1234@h/d", "PGPASSWORD": "pgpw-5678",
           "CRONBOX_HMAC_SECRET": "hmac-abcd", "CRONBOX_SINKS": "q=http://h/run|secret=sink-efgh",
           "CRONBOX_POLL_INTERVAL": "1s", "HOME": "/root"}
    assert secret_values(env) == {"dbpw-1234", "pgpw-5678", "hmac-abcd", "sink-efgh"}


@pytest.fixture
def restore_logging():
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.parametrize("fmt", ["text", "json"])
@pytest.mark.usefixtures("restore_logging")
def test_log_lines_mask_registered_secrets_in_messages_fields_and_tracebacks(fmt, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql://u:Db-Pw-9876@h/d")
    monkeypatch.setenv("CRONBOX_HMAC_SECRET", "Hm4c-Secret-x")
    cblog.setup("info", fmt)
    stream = io.StringIO()
    logging.getLogger().handlers[0].setStream(stream)  # type: ignore[attr-defined]
    logger = logging.getLogger("cronbox.test")
    cblog.event(logger, "connecting to postgresql://u:Db-Pw-9876@h/d", run_id=7, signing="Hm4c-Secret-x")
    try:
        raise RuntimeError("bad secret Hm4c-Secret-x in 'Db-Pw-9876'")
    except RuntimeError:
        logger.exception("failed", extra={"fields": {"job": "j"}})
    out = stream.getvalue()
    assert "Db-Pw-9876" not in out and "Hm4c-Secret-x" not in out
    lines = out.strip().splitlines()
    if fmt == "json":
        docs = [orjson.loads(line) for line in lines]
        assert docs[0]["run_id"] == 7 and docs[1]["job"] == "j" and "RuntimeError" in docs[1]["exc"]
    else:
        assert "run_id=7" in lines[0]


def test_describe_shows_the_effective_configuration_without_secrets():
    env = {"DATABASE_URL": "postgresql://u:Db-Pw@h/d",
           "CRONBOX_SINKS": "a=https://x:UrlPw@h/run;b=log", "CRONBOX_METRICS_PORT": "9100"}
    shown = {**Config.from_env(env).describe(), **RelaySettings.from_env(env).describe()}
    assert shown["dsn"] == "postgresql://u:***@h/d" and shown["relay_sinks"] == "a=https://x:***@h/run;b=log"
    assert shown["metrics_port"] == 9100 and shown["health_stale"] == "1m" and shown["relay_lease"] == "30s"
    # durations as a user writes them; where a secret comes from, and "no secret", are not secrets
    assert PollerSettings.from_env({}).describe()["retention"] == "30d"
    assert redact("secret=none secret_env=WORKER_SECRET password=hunter2") == \
        "secret=none secret_env=WORKER_SECRET password=***"


def test_migrate_refuses_a_function_without_an_explicit_grant_decision(pg, tmp_path: Path):
    root = tmp_path / "sql"
    shutil.copytree(sql_root(), root)
    (root / "functions" / "internal" / "frobnicate.sql").write_text(
        "CREATE OR REPLACE FUNCTION cronbox.frobnicate() RETURNS int LANGUAGE sql "
        "SET search_path = pg_catalog, pg_temp AS $$ SELECT 1 $$;\n")
    dsn = pg.create_db("cronbox_unclassified")
    try:
        with pytest.raises(MigrateError, match=r"without an explicit decision: cronbox.frobnicate\(\): no REVOKE"):
            migrate(dsn, root)
        with db.connect(dsn) as conn:  # the code transaction rolled back as a whole
            assert conn.execute("SELECT to_regprocedure('cronbox.frobnicate()')").fetchone()[0] is None
    finally:
        pg.drop_db("cronbox_unclassified")
