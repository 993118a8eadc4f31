"""The `cronbox` command. The composition root: it loads the poller and relay packages by
name, so the shared package itself never imports them."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import importlib
import os
import sys
from pathlib import Path

import psycopg

from cronbox.text import printable
from cronbox import __version__, db, log as logsetup
from cronbox.config import COMMON_FOR, Config, ConfigError, env_help
from cronbox.migrate import MigrateError, migrate
from cronbox.pgcluster import ClusterError, PgNotFound, find_dev_cluster

COMMANDS = {  # one line each in `cronbox --help`, also on an 80-column terminal
    "migrate": "create/upgrade the schema; idempotent, concurrent-safe",
    "poller": "materialise schedules, dispatch due runs to the outbox",
    "relay": "deliver outbox messages to their sinks, at least once",
    "dev": "private PostgreSQL, poller, relay, demo worker at once",
    "status": "show schedules, queues, dead letters and live processes",
    "demo-worker": "the demo HTTP worker: receives runs, completes them",
    "worker": "run a cronbox.worker app (module:attr); pull, or push --port",
    "web": "the web console: schedules, runs, queues, dead letters",
}


# The settings class each command adds to the shared Config (module, class), imported by name.
OWN_SETTINGS = {
    "poller": ("poller.settings", "PollerSettings"),
    "relay": ("relay.settings", "RelaySettings"),
    "web": ("web.settings", "WebSettings"),
    "worker": ("cronbox.worker.settings", "WorkerSettings"),
    "demo-worker": ("cronbox.worker.settings", "WorkerSettings"),  # it is a cronbox.worker app
}
NOTES = {
    "dev": "The poller, relay and console it starts read their own variables too "
           "(cronbox poller --help, cronbox relay --help, cronbox web --help). The routes of "
           "CRONBOX_SINKS and --sink are added beside the demo worker's '*' route.",
    "relay": "Per-route options (timeout, batching, signing secret, ...) go in CRONBOX_SINKS: docs/relay.md.",
}


def _settings_class(command: str) -> type | None:
    if command not in OWN_SETTINGS:
        return None
    module, name = OWN_SETTINGS[command]
    return getattr(importlib.import_module(module), name)


def _epilog(command: str) -> str:
    """The environment variables of a command, from the one place each is declared."""
    own = _settings_class(command)
    text = env_help(Config, *([own] if own else []), only=COMMON_FOR[command])
    return text + (f"\n\n{NOTES[command]}" if command in NOTES else "")


class _CommandHelp(argparse.RawDescriptionHelpFormatter):
    """Options as argparse writes them; the epilog (the variables) kept as laid out."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=28, width=80)


class _OneLineHelp(argparse.HelpFormatter):
    """A help column wide enough for the longest command name, so each is one line."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=20, width=80)
        self._action_max_length = 18


def _limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 1 <= value <= 10000:
        raise argparse.ArgumentTypeError(f"must be from 1 to 10000, got {value}")
    return value


def _buckets(text: str | None, citus: bool) -> int | None:
    """`migrate --buckets B`, checked before anything connects: one line and exit 1 if bad."""
    from cronbox.citus import check_bucket_count

    if text is None:
        return None
    if not citus:
        raise MigrateError("--buckets: only with --citus (plain PostgreSQL has no buckets)")
    try:
        value = int(text)
    except ValueError:
        raise MigrateError(f"--buckets: must be a power of two from 1 to 1,024, got {text!r}") from None
    return check_bucket_count(value)


def _print_citus(done) -> None:
    print(f"cronbox schema at version {done.schema.version} on Citus {done.citus_version}, "
          f"{done.worker_nodes} worker node(s); reference tables made: "
          f"{', '.join(done.made_reference) or 'none (already)'}; "
          f"{done.buckets} buckets{' made' if done.buckets_made else ''}"
          f"{'; hot tables distributed by bucket' if done.distributed else ''}")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cronbox", description="A job scheduler that lives inside PostgreSQL.",
        epilog="`cronbox COMMAND --help` lists the options of a command and the environment "
               "variables it reads, with their defaults.",
        formatter_class=_OneLineHelp)
    p.add_argument("--version", action="version", version=f"cronbox {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, help_text in COMMANDS.items():
        sp = sub.add_parser(name, help=help_text, description=help_text, epilog=_epilog(name),
                            formatter_class=_CommandHelp)
        if name == "dev":
            sp.add_argument("--data", default=".cronbox", help="folder for the private cluster (default ./.cronbox)")
            sp.add_argument("--cron", default="*/5 * * * * *", help="demo job schedule (default every 5 s)")
            sp.add_argument("--sink", action="append", default=[], metavar="QUEUE=TARGET",
                            help="add a relay route beside the demo worker's, e.g. emails=http://127.0.0.1:8081/run "
                                 "(repeatable; route options as in CRONBOX_SINKS, whose routes are added too)")
        if name == "demo-worker":
            sp.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
            sp.add_argument("--port", type=int, default=8080, help="port (default 8080)")
        if name == "worker":
            sp.add_argument("app", metavar="MODULE:ATTR", help="the cronbox.worker.Worker to run, e.g. myapp.jobs:worker")
            sp.add_argument("--port", type=int, metavar="PORT", help="push mode: serve the relay on this port")
            sp.add_argument("--http", type=int, dest="port", help=argparse.SUPPRESS)  # the option's former name
            sp.add_argument("--host", default="127.0.0.1", help="push mode: address to bind (default 127.0.0.1)")
            sp.add_argument("--allow-unsigned", action="store_true", help="push mode: accept requests without a signature")
        if name == "web":
            sp.add_argument("--host", default=None, help="address to bind (default CRONBOX_WEB_HOST or 127.0.0.1)")
            sp.add_argument("--port", type=int, default=None, help="port (default CRONBOX_WEB_PORT or 8088)")
            sp.add_argument("--hash-password", action="store_true",
                            help="read a password from stdin, print a hash for CRONBOX_WEB_USERS, exit")
        if name == "migrate":
            sp.add_argument("--citus", action="store_true",
                            help="on a Citus coordinator: the same schema, with the shared tables made "
                                 "reference tables, the buckets of the job and the bucket leases "
                                 "(docs/citus.md); refused without Citus")
            sp.add_argument("--distribute", action="store_true",
                            help="with --citus: distribute the hot tables by the bucket of the job "
                                 "(docs/citus.md, \"Distributing the hot tables\"); kept by every later migrate. "
                                 "Not every call and view works there yet (the list is in docs/citus.md)")
            sp.add_argument("--buckets", metavar="B",
                            help="with --citus, when the buckets are first made: how many, a power of two "
                                 "from 1 to 1024 (default 32); it cannot change afterwards")
        if name == "status":
            sp.add_argument("--json", action="store_true", help="machine-readable output")
            sp.add_argument("--limit", type=_limit, default=50, help="rows per section, 1-10000 (default 50)")
    return p


# Commands that, with no database configured, use the running `cronbox dev` of the working directory.
FIND_DEV_DATABASE = ("status", "web", "worker", "demo-worker")


def _require_dsn_or_env(cfg: Config, command: str) -> Config:
    if cfg.dsn or os.environ.get("PGHOST") or os.environ.get("PGDATABASE"):
        return cfg
    cluster = find_dev_cluster(Path.cwd()) if command in FIND_DEV_DATABASE else None
    if cluster is None:
        raise ConfigError("DATABASE_URL is not set (nor PGHOST/PGDATABASE); `cronbox dev` starts a private database")
    dsn = cluster.dsn()
    os.environ["DATABASE_URL"] = dsn  # for the settings read later (the worker's)
    print(f"cronbox: using the database of `cronbox dev` in {cluster.root}: {dsn}", file=sys.stderr)
    return dataclasses.replace(cfg, dsn=dsn)


async def _check_schema(dsn: str) -> None:
    async with await db.aconnect(dsn) as conn:
        # by the catalog, not to_regclass: a role without USAGE on the schema (the console's
        # NOINHERIT login role, which uses cronbox only through SET ROLE) may still start
        row = await (await conn.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.relname = 'schema_version'"
            " AND c.relnamespace = (SELECT n.oid FROM pg_catalog.pg_namespace n WHERE n.nspname = 'cronbox'))"
        )).fetchone()
        if not row or not row[0]:
            raise MigrateError("the cronbox schema is missing: run `cronbox migrate`")


def _run_process(package: str, cfg: Config) -> int:
    """Wait for a writable primary (the database may be down, starting up, recovering or a
    standby when the process starts: say so and retry with backoff, up to
    CRONBOX_STARTUP_TIMEOUT if set), check the schema, then run the process body."""
    from cronbox.proc import run_until_stopped

    module = importlib.import_module(f"{package}.main")

    async def body(waker) -> None:
        timeout = cfg.startup_timeout.total_seconds()
        if not await db.wait_for_primary(cfg.dsn, timeout=timeout, what=package, stop=waker.stop):
            return
        await db.retrying(lambda: _check_schema(cfg.dsn), budget=timeout or 3600, what="schema check", stop=waker.stop)
        await module.run(cfg, waker)

    return asyncio.run(run_until_stopped(package, body))


def _hash_password() -> int:
    auth = importlib.import_module("web.auth")
    if sys.stdin.isatty():
        import getpass

        password = getpass.getpass("password: ")
    else:
        password = sys.stdin.readline().rstrip("\n")
    print(auth.hash_password(password))
    return 0


def _run_web(cfg: Config, args: argparse.Namespace) -> int:
    from cronbox.proc import run_until_stopped

    settings = importlib.import_module("web.settings").from_env(host=args.host, port=args.port)
    module = importlib.import_module("web.main")
    asyncio.run(_check_schema(cfg.dsn))
    return asyncio.run(run_until_stopped("web", lambda waker: module.run(cfg, waker, settings)))


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if getattr(args, "hash_password", False):
        try:
            return _hash_password()
        except ConfigError as exc:
            print(f"cronbox: {exc}", file=sys.stderr)
            return 1
    cfg: Config | None = None
    try:
        cfg = Config.from_env()
        logsetup.setup(cfg.log_level, cfg.log_format)
        db.configure(connect_timeout=cfg.connect_timeout.total_seconds())
        if args.command == "dev":
            from cronbox.dev import run_dev

            return run_dev(cfg, Path(args.data), args.cron, args.sink)
        cfg = _require_dsn_or_env(cfg, args.command)
        if args.command == "migrate" and (args.citus or args.buckets is not None or args.distribute):
            from cronbox.citus import migrate_citus

            if args.distribute and not args.citus:
                raise MigrateError("--distribute: only with --citus (plain PostgreSQL has nothing to distribute)")
            done = migrate_citus(cfg.dsn, _buckets(args.buckets, args.citus), distribute=args.distribute)
            _print_citus(done)
            return 0
        if args.command == "migrate":
            result = migrate(cfg.dsn)
            print(f"cronbox schema at version {result.version}"
                  f" ({len(result.applied)} migration(s) applied"
                  f"{', functions re-applied' if result.code_reapplied else ', nothing to do' if not result.applied else ''})")
            from cronbox.citus import has_citus_layer, migrate_citus

            with db.connect(cfg.dsn) as conn:
                layered = has_citus_layer(conn)
            if layered:  # migrated with --citus before: its layer follows the upgrade
                _print_citus(migrate_citus(cfg.dsn))
            return 0
        if args.command in ("poller", "relay"):
            _settings_class(args.command).from_env()  # validated before anything starts
            return _run_process(args.command, cfg)
        if args.command == "web":
            return _run_web(cfg, args)
        if args.command == "status":
            from cronbox.status import show

            return show(cfg.dsn, as_json=args.json, limit=args.limit)
        if args.command == "worker":
            from cronbox.worker.cli import run_worker

            return run_worker(cfg, args.app, args.port, args.host, args.allow_unsigned)
        if args.command == "demo-worker":
            from cronbox.demo_worker import serve
            from cronbox.proc import run_until_stopped

            return asyncio.run(run_until_stopped(
                "demo-worker", lambda waker: serve(args.host, args.port, waker.stop, dsn=cfg.dsn or None)))
    except (ConfigError, PgNotFound, ClusterError, MigrateError, db.StartupTimeout) as exc:
        print(f"cronbox: {printable(exc, 2000)}", file=sys.stderr)
        return 1
    except (psycopg.Error, OSError) as exc:
        print(f"cronbox: {printable(db.explain(exc, cfg.dsn if cfg is not None else None), 2000)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 2


if __name__ == "__main__":
    sys.exit(main())
