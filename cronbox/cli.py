"""The `cronbox` command. The composition root: it loads the poller and relay packages by
name, so the shared package itself never imports them."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import sys
from pathlib import Path

import psycopg

from cronbox.text import printable
from cronbox import __version__, db, log as logsetup
from cronbox.config import Config, ConfigError
from cronbox.migrate import MigrateError, migrate
from cronbox.pgcluster import ClusterError, PgNotFound

COMMANDS = {  # one line each in `cronbox --help`, also on an 80-column terminal
    "migrate": "create/upgrade the schema; idempotent, concurrent-safe",
    "poller": "materialise schedules, dispatch due runs to the outbox",
    "relay": "deliver outbox messages to their sinks, at least once",
    "dev": "private PostgreSQL, poller, relay, demo worker at once",
    "status": "show schedules, queues, dead letters and live processes",
    "demo-worker": "the demo HTTP worker: receives runs, completes them",
}


class _OneLineHelp(argparse.HelpFormatter):
    """A help column wide enough for the longest command name, so each is one line."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=20, width=80)
        self._action_max_length = 18


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cronbox", description="A job scheduler that lives inside PostgreSQL.",
        formatter_class=_OneLineHelp)
    p.add_argument("--version", action="version", version=f"cronbox {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, help_text in COMMANDS.items():
        sp = sub.add_parser(name, help=help_text, description=help_text)
        if name == "dev":
            sp.add_argument("--data", default=".cronbox", help="folder for the private cluster (default ./.cronbox)")
            sp.add_argument("--cron", default="*/5 * * * * *", help="demo job schedule (default every 5 s)")
        if name == "demo-worker":
            sp.add_argument("--host", default="127.0.0.1")
            sp.add_argument("--port", type=int, default=8080)
        if name == "status":
            sp.add_argument("--json", action="store_true", help="machine-readable output")
            sp.add_argument("--limit", type=int, default=50, help="rows per section (default 50)")
    return p


def _require_dsn_or_env(cfg: Config) -> None:
    if not cfg.dsn and not os.environ.get("PGHOST") and not os.environ.get("PGDATABASE"):
        raise ConfigError("DATABASE_URL is not set (nor PGHOST/PGDATABASE); `cronbox dev` starts a private database")


def _check_schema(dsn: str) -> None:
    with db.connect(dsn) as conn:
        row = conn.execute("SELECT to_regclass('cronbox.schema_version') IS NOT NULL").fetchone()
        if not row or not row[0]:
            raise MigrateError("the cronbox schema is missing: run `cronbox migrate`")


def _run_process(package: str, cfg: Config) -> int:
    from cronbox.proc import run_until_stopped

    module = importlib.import_module(f"{package}.main")
    _check_schema(cfg.dsn)
    return asyncio.run(run_until_stopped(package, lambda waker: module.run(cfg, waker)))


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        cfg = Config.from_env()
        logsetup.setup(cfg.log_level, cfg.log_format)
        if args.command == "dev":
            from cronbox.dev import run_dev

            return run_dev(cfg, Path(args.data), args.cron)
        _require_dsn_or_env(cfg)
        if args.command == "migrate":
            result = migrate(cfg.dsn)
            print(f"cronbox schema at version {result.version}"
                  f" ({len(result.applied)} migration(s) applied"
                  f"{', functions re-applied' if result.code_reapplied else ', nothing to do' if not result.applied else ''})")
            return 0
        if args.command in ("poller", "relay"):
            return _run_process(args.command, cfg)
        if args.command == "status":
            from cronbox.status import show

            return show(cfg.dsn, as_json=args.json, limit=args.limit)
        if args.command == "demo-worker":
            from cronbox.demo_worker import serve
            from cronbox.proc import run_until_stopped

            return asyncio.run(run_until_stopped(
                "demo-worker", lambda waker: serve(cfg.dsn, args.host, args.port, waker.stop)))
    except (ConfigError, PgNotFound, ClusterError, MigrateError) as exc:
        print(f"cronbox: {printable(exc, 2000)}", file=sys.stderr)
        return 1
    except (psycopg.Error, OSError) as exc:
        print(f"cronbox: {printable(db.explain(exc), 2000)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 2


if __name__ == "__main__":
    sys.exit(main())
