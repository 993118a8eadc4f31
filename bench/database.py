"""The bench database: a private PostgreSQL cluster with durable settings (or --dsn), migrated
with the real migrator, plus the measurements the scripts take from it: exact WAL and
transaction counters, table sizes, pg_stat_statements."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import psycopg

from cronbox import db
from cronbox.migrate import migrate
from cronbox.pgcluster import FAST_SETTINGS, Cluster

# Durable: every commit waits for its WAL flush. The rest sizes the server for a bench on a
# 24 GB machine (no checkpoint storm mid-run) and turns on the profiling hooks.
DURABLE_SETTINGS = {
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "shared_buffers": "512MB",
    "max_wal_size": "8GB",
    "checkpoint_timeout": "15min",
    "max_connections": "200",
    "track_io_timing": "on",
    "shared_preload_libraries": "pg_stat_statements",  # track stays settable: ALTER SYSTEM (profile runs)
    "pg_stat_statements.max": "5000",
}


class Database:
    """The bench database: a private cluster (durable unless --fast) or --dsn."""

    def __init__(self, args: argparse.Namespace, name: str):
        self.args = args
        self.name = name
        self.cluster: Cluster | None = None
        self.tmp: Path | None = None
        self.dsn = ""
        self.settings: dict[str, str] = {}

    def __enter__(self) -> Database:
        if self.args.dsn:
            self.dsn = self.args.dsn
        else:
            self.tmp = Path(tempfile.mkdtemp(prefix=f"cronbox-bench-{self.name}-"))
            os.chmod(self.tmp, 0o755)
            settings = dict(DURABLE_SETTINGS)
            if self.args.fast:
                settings.update(FAST_SETTINGS)
            for item in getattr(self.args, "pg", None) or []:
                name, sep, value = item.partition("=")
                if not sep or not name:
                    raise SystemExit(f"--pg: expected NAME=VALUE, got {item!r}")
                settings[name] = value
            self.cluster = Cluster(self.tmp / "pg", settings=settings)
            admin = self.cluster.start()
            with db.connect(admin) as conn:
                conn.execute("CREATE DATABASE bench")
            self.dsn = self.cluster.dsn("bench")
        print(f"migrating {self.dsn}", file=sys.stderr, flush=True)
        migrate(self.dsn)
        with db.connect(self.dsn) as conn:
            rows = conn.execute(
                "SELECT name, setting FROM pg_settings WHERE name = ANY(%s)",
                (["fsync", "synchronous_commit", "full_page_writes", "shared_buffers", "wal_level",
                  "max_wal_size", "shared_preload_libraries", "server_version"],)).fetchall()
            self.settings = dict(rows)
            with contextlib.suppress(psycopg.Error):
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.cluster is not None:
            self.cluster.stop(mode="immediate")
        if self.tmp is not None and not self.args.keep:
            shutil.rmtree(self.tmp, ignore_errors=True)
        elif self.tmp is not None:
            print(f"kept {self.tmp}", file=sys.stderr, flush=True)

    @property
    def postmaster(self) -> int | None:
        return self.cluster.pid() if self.cluster else None

    @property
    def durable(self) -> bool:
        return self.settings.get("fsync") == "on" and self.settings.get("synchronous_commit") == "on"

    def connect(self) -> psycopg.Connection:
        return db.connect(self.dsn)

    def scalar(self, sql: str, params: Any = None) -> Any:
        with self.connect() as conn:
            row = conn.execute(sql, params).fetchone()
            return row[0] if row else None

    def has_function(self, name: str) -> bool:
        return bool(self.scalar(
            "SELECT EXISTS (SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = 'cronbox' AND p.proname = %s)", (name,)))

    def libpq_args(self) -> list[str]:
        info = psycopg.conninfo.conninfo_to_dict(self.dsn)
        return ["-h", str(info.get("host", "127.0.0.1")), "-p", str(info.get("port", 5432)),
                "-U", str(info.get("user", "postgres")), "-d", str(info.get("dbname", "bench"))]

    def bindir(self) -> Path:
        if self.cluster is not None:
            return self.cluster.bindir
        from cronbox.pgcluster import find_bindir
        return find_bindir()

    # ---- sizes and profiling
    def counters(self) -> dict[str, float]:
        """Exact server-wide counters whose deltas give the cost per run: WAL bytes written
        (LSN distance) and write transactions (xids assigned). The cumulative statistics
        views are flushed lazily, so they are not used for per-run figures."""
        with self.connect() as conn:
            lsn, xid = conn.execute(
                "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8, "
                "pg_snapshot_xmax(pg_current_snapshot())::text::float8").fetchone()
        return {"wal_bytes": float(lsn), "write_xacts": float(xid)}

    def clone_jobs(self, template: str, prefix: str, count: int) -> None:
        """Bulk path: `count` copies of job `template` named prefix1..prefixN (every column but
        the id and the name copied, so new columns come along). cronbox.schedule() checks the
        time zone against pg_timezone_names on every call (tens of ms each), which would
        dominate a bench's set-up; the copies are what schedule() would have written."""
        with self.connect() as conn:
            cols = [r[0] for r in conn.execute(
                "SELECT attname FROM pg_attribute WHERE attrelid = 'cronbox.job'::regclass AND attnum > 0 "
                "AND NOT attisdropped AND attname NOT IN ('job_id', 'name') ORDER BY attnum").fetchall()]
            collist = ", ".join(f'"{c}"' for c in cols)
            conn.execute(
                f"INSERT INTO cronbox.job (name, {collist}) SELECT %s || i, {collist} "
                f"FROM cronbox.job, generate_series(1, %s) AS i WHERE name = %s", (prefix, count, template))
            copy_fire_state(conn, template, prefix)

    def table_sizes(self, tables: list[str]) -> dict[str, dict[str, int]]:
        """Heap (with TOAST) and index bytes of each table, partitions included."""
        out: dict[str, dict[str, int]] = {}
        with self.connect() as conn:
            for t in tables:
                row = conn.execute(
                    "SELECT coalesce(sum(pg_table_size(c.oid)), 0), coalesce(sum(pg_indexes_size(c.oid)), 0) "
                    "FROM pg_class c WHERE c.oid = %s::regclass OR c.oid IN ("
                    "  SELECT inhrelid FROM pg_inherits WHERE inhparent = %s::regclass)", (t, t)).fetchone()
                out[t] = {"table_bytes": int(row[0]), "index_bytes": int(row[1])}
        return out

    def reset_statements(self) -> bool:
        try:
            with self.connect() as conn:
                conn.execute("SELECT pg_stat_statements_reset()")
            return True
        except psycopg.Error:
            return False

    def set_statement_tracking(self, level: str) -> None:
        """'top' for timed runs, 'all' to see the statements inside cronbox functions."""
        with contextlib.suppress(psycopg.Error), self.connect() as conn:
            conn.execute(f"ALTER SYSTEM SET pg_stat_statements.track = '{level}'")
            conn.execute("SELECT pg_reload_conf()")

    def top_statements(self, limit: int = 15) -> list[dict[str, Any]]:
        try:
            with self.connect() as conn:
                rows = conn.execute(
                    "SELECT calls, round(total_exec_time::numeric, 1), round(mean_exec_time::numeric, 3), rows, "
                    "shared_blks_hit + shared_blks_read, wal_records, toplevel, "
                    "regexp_replace(left(query, 300), '\\s+', ' ', 'g') "
                    "FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                    "ORDER BY total_exec_time DESC LIMIT %s", (limit,)).fetchall()
        except psycopg.Error as exc:
            return [{"error": str(exc).strip()}]
        return [{"calls": r[0], "total_ms": float(r[1]), "mean_ms": float(r[2]), "rows": r[3],
                 "buffers": r[4], "wal_records": r[5], "toplevel": r[6], "query": r[7]} for r in rows]


class WaitSampler:
    """What the server's backends are doing, sampled every `interval` s in a thread: counts of
    (statement, wait event) over the active backends of this database. A lock convoy or a
    WAL-flush bound shows up here as the top entries; CPU work shows as 'on CPU'."""

    def __init__(self, database: Database, interval: float = 0.1):
        import threading

        self.database = database
        self.interval = interval
        self.counts: dict[tuple[str, str], int] = {}
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with self.database.connect() as conn:
            while not self._stop.wait(self.interval):
                rows = conn.execute(
                    "SELECT regexp_replace(left(query, 60), '\\s+', ' ', 'g'), "
                    "coalesce(wait_event_type || ':' || wait_event, 'on CPU') "
                    "FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' "
                    "AND pid <> pg_backend_pid() AND backend_type = 'client backend'").fetchall()
                self.samples += 1
                for q, w in rows:
                    self.counts[(q, w)] = self.counts.get((q, w), 0) + 1

    def __enter__(self) -> WaitSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def top(self, n: int = 12) -> dict[str, Any]:
        """Average number of backends in each (statement, wait) state, busiest first."""
        ranked = sorted(self.counts.items(), key=lambda kv: -kv[1])[:n]
        return {"samples": self.samples, "interval_s": self.interval,
                "avg_backends": [{"statement": q, "wait": w, "avg": round(c / max(self.samples, 1), 3)}
                                 for (q, w), c in ranked]}


# Jobs inserted with a bare INSERT get the rows schedule() gives a new job (saturation state,
# statistics, owners' counts): cronbox.add_job_rows, idempotent (docs/runs.md).
ADD_JOB_ROWS = "SELECT cronbox.add_job_rows(ARRAY(SELECT job_id FROM cronbox.job))"


def copy_fire_state(conn: psycopg.Connection, template: str, prefix: str) -> None:
    """The saturation state (cronbox.job_fire: frontier, next fire, fires made) of job
    `template` given to the jobs whose names start with `prefix`, as schedule() would have
    written it for each."""
    conn.execute(ADD_JOB_ROWS)
    conn.execute(
        "UPDATE cronbox.job_fire f SET frontier = t.frontier, next_fire = t.next_fire, fires_made = t.fires_made "
        "FROM cronbox.job c, cronbox.job_fire t JOIN cronbox.job tj USING (job_id) "
        "WHERE c.job_id = f.job_id AND left(c.name, length(%s)) = %s AND tj.name = %s AND c.name <> %s",
        (prefix, prefix, template, template))
