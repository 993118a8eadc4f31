"""A private PostgreSQL cluster from the machine's own server binaries.

Used by `cronbox dev` (under ./.cronbox/) and by the test suite (in a temporary folder).
It finds the binaries (`$CRONBOX_PG_BINDIR`, `pg_config --bindir`, then Debian's versioned
/usr/lib/postgresql/*/bin), initdb's a data folder, starts the server on 127.0.0.1 on a free
port with its socket in the data folder, and stops it by signalling its postmaster pid and
waiting for that process to exit.
PostgreSQL refuses to run as root, so as root only the PostgreSQL processes run as the
`postgres` OS user, with the folder owned by it (and search permission added to any
ancestor folder it could not otherwise traverse, such as a 0700 /root). For the failover bench
and tests, a Cluster can also be made a streaming standby of another (`basebackup`), promoted
(`promote`), and rewound after a failover (`rewind`).
"""

from __future__ import annotations

import os
import pwd
import select
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

INSTALL_HINT = (
    "PostgreSQL server binaries not found: install them (Debian/Ubuntu: `apt-get install postgresql`; "
    "macOS: `brew install postgresql`), set CRONBOX_PG_BINDIR to the folder holding initdb and pg_ctl, "
    "or set DATABASE_URL to use an existing server"
)

STOP_SIGNALS = {"smart": signal.SIGTERM, "fast": signal.SIGINT, "immediate": signal.SIGQUIT}
FAST_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


class PgNotFound(RuntimeError):
    pass


class ClusterError(RuntimeError):
    pass


def _has_server(bindir: Path) -> bool:
    return (bindir / "initdb").is_file() and (bindir / "pg_ctl").is_file() and (bindir / "postgres").is_file()


def find_bindir() -> Path:
    """The folder with initdb, pg_ctl and postgres, or PgNotFound with an install hint."""
    candidates: list[Path] = []
    if os.environ.get("CRONBOX_PG_BINDIR"):
        candidates.append(Path(os.environ["CRONBOX_PG_BINDIR"]))
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=True, timeout=10)
            candidates.append(Path(out.stdout.strip()))
        except (subprocess.SubprocessError, OSError):
            pass

    def version_key(p: Path) -> float:
        try:
            return float(p.parent.name)
        except ValueError:
            return 0.0

    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=version_key, reverse=True)
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(Path(initdb).parent)
    for c in candidates:
        if _has_server(c):
            return c
    raise PgNotFound(INSTALL_HINT)


def _wait_exit(pid: int, timeout: float) -> bool:
    """Wait until process `pid` (not a child of ours) has exited: a pidfd becomes readable when
    it does (Linux 5.3+); elsewhere, its pid is polled."""
    deadline = time.monotonic() + timeout
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    except (AttributeError, OSError):
        fd = None
    if fd is not None:
        try:
            return bool(select.select([fd], [], [], timeout)[0])
        finally:
            os.close(fd)
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass
        time.sleep(0.05)
    return False


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """One data folder and the server running on it.

    `root` holds `data/` (the cluster) and `server.log`. start() reuses a server already
    running on the folder; stop() stops it and waits.
    """

    def __init__(self, root: Path, *, settings: dict[str, str] | None = None, bindir: Path | None = None):
        self.root = Path(root).resolve()
        self.data = self.root / "data"
        self.logfile = self.root / "server.log"
        self.settings = dict(settings or {})
        self._bindir = bindir
        self._as_postgres = os.geteuid() == 0

    @property
    def bindir(self) -> Path:
        if self._bindir is None:
            self._bindir = find_bindir()
        return self._bindir

    def _run(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        kwargs: dict[str, object] = {}
        if self._as_postgres:
            # again before each command: something else may have closed an ancestor since
            self._make_reachable()
            pw = pwd.getpwnam("postgres")
            kwargs = {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": [], "cwd": self.root}
        proc = subprocess.run(
            [str(self.bindir / args[0]), *args[1:]], capture_output=True, text=True, timeout=timeout, **kwargs
        )
        if check and proc.returncode != 0:
            raise ClusterError(f"{args[0]} failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()}")
        return proc

    def _own(self, path: Path) -> None:
        if self._as_postgres:
            pw = pwd.getpwnam("postgres")
            os.chown(path, pw.pw_uid, pw.pw_gid)

    @property
    def initialized(self) -> bool:
        return (self.data / "PG_VERSION").is_file()

    def _make_reachable(self) -> None:
        """As root, let the postgres user reach the folder: add search (x, not read) permission
        for others on each ancestor that lacks it (e.g. a 0700 /root or pytest tmp folder)."""
        if not self._as_postgres:
            return
        for parent in reversed(self.root.parents):
            mode = parent.stat().st_mode
            if not mode & 0o001:
                os.chmod(parent, mode | 0o001)

    def init(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self._make_reachable()
        if self.initialized:
            return
        self._own(self.root)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
                  "--locale=C", "--no-sync")

    def pid(self) -> int | None:
        """The postmaster pid if a server is running on this folder (not a process that took
        over the pid of one that died without removing postmaster.pid)."""
        pidfile = self.data / "postmaster.pid"
        try:
            pid = int(pidfile.read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return pid if self._is_our_postmaster(pid) else None

    @property
    def port(self) -> int:
        try:
            return int((self.data / "postmaster.pid").read_text().splitlines()[3])
        except (OSError, ValueError, IndexError):
            raise ClusterError(f"no server running on {self.data}") from None

    def dsn(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def start(self) -> str:
        """Start (or reuse) the server; returns the DSN of database postgres."""
        self.init()
        if self.pid() is not None:
            return self.dsn()
        options = {
            "listen_addresses": "127.0.0.1",
            "port": str(free_port()),
            # Unix socket paths are limited to ~107 bytes; go TCP-only if the folder is deep.
            "unix_socket_directories": str(self.data) if len(str(self.data)) < 90 else "",
            **self.settings,
        }
        opts = " ".join(f"-c {k}={v}" if v != "" else f"-c {k}=''" for k, v in options.items())
        if not self.logfile.exists():
            self.logfile.touch()
            self._own(self.logfile)
        proc = self._run("pg_ctl", "-D", str(self.data), "-l", str(self.logfile), "-o", opts, "-w", "-t", "60",
                         "start", check=False)
        if proc.returncode != 0:
            tail = self.logfile.read_text(errors="replace")[-2000:] if self.logfile.exists() else ""
            raise ClusterError(f"pg_ctl start failed: {proc.stderr.strip()}\n{tail}")
        return self.dsn()

    def stop(self, mode: str = "fast", timeout: float = 60) -> None:
        """Stop the server: signal its postmaster (smart: SIGTERM, fast: SIGINT, immediate:
        SIGQUIT, as pg_ctl does) and wait for that process to exit, by its pid. Signalled from
        this process rather than through pg_ctl: as root, pg_ctl runs as the postgres user and
        must reach postmaster.pid through every ancestor folder, which something else may have
        closed since the start (pytest resets its /tmp/pytest-of-<user> to 0700 whenever a run
        starts); pg_ctl then fails without signalling and the server is left running. A
        ClusterError if it has not exited within `timeout` seconds."""
        pid = self.pid()
        if pid is None:
            return
        try:
            os.kill(pid, STOP_SIGNALS[mode])
        except ProcessLookupError:
            return
        if not _wait_exit(pid, timeout):
            raise ClusterError(f"the server on {self.data} (pid {pid}) did not stop within {timeout:.0f}s "
                               f"({mode} shutdown); see {self.logfile}")

    def _is_our_postmaster(self, pid: int) -> bool:
        """Whether `pid` (read from postmaster.pid) is a process running in this data folder,
        not another one that took over the pid of a server that died without removing its file."""
        try:
            return Path(f"/proc/{pid}/cwd").resolve(strict=True) == self.data.resolve()
        except (OSError, RuntimeError):
            return True  # no /proc (or not allowed to look): trust the pid file, as pg_ctl does

    # ------------------------------------------------------------------ streaming replication
    # For the failover bench and tests: a standby of another Cluster on this machine.

    def basebackup(self, primary: Cluster) -> None:
        """Make this folder a streaming standby of `primary` (which must be running):
        pg_basebackup -R (standby.signal + primary_conninfo), WAL streamed during the copy.
        Whatever the folder held before is replaced."""
        self.root.mkdir(parents=True, exist_ok=True)
        self._make_reachable()
        self._own(self.root)
        if self.pid() is not None:
            raise ClusterError(f"cannot rebuild {self.data}: a server is running on it")
        shutil.rmtree(self.data, ignore_errors=True)
        self._run("pg_basebackup", "-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres",
                  "-D", str(self.data), "-R", "-X", "stream", "-c", "fast", timeout=600)

    def rewind(self, source: Cluster) -> None:
        """Turn this stopped former primary into a standby of `source` (the promoted one):
        pg_rewind -R (needs wal_log_hints or data checksums, set before the failure; a
        crashed target is first recovered in single-user mode by pg_rewind itself)."""
        if self.pid() is not None:
            raise ClusterError(f"cannot rewind {self.data}: a server is running on it")
        self._run("pg_rewind", f"--target-pgdata={self.data}", "-R",
                  f"--source-server=host=127.0.0.1 port={source.port} user=postgres dbname=postgres", timeout=600)

    def promote(self) -> None:
        """Promote this standby and wait until it accepts writes."""
        self._run("pg_ctl", "-D", str(self.data), "-w", "-t", "60", "promote")

    def restart(self) -> str:
        """Stop and start on the same port (for tests of reconnecting processes)."""
        port = self.port
        self.stop()
        self.settings["port"] = str(port)
        return self.start()


DEV_FOLDER = ".cronbox"  # where `cronbox dev` keeps its private cluster by default


def find_dev_cluster(start: Path) -> Cluster | None:
    """The private cluster of `cronbox dev` for this working directory: ./.cronbox in `start` or
    the nearest parent that has one (as git finds .git). None when there is none; a ClusterError
    when there is one but its server is not running."""
    for folder in (start, *start.parents):
        root = folder / DEV_FOLDER
        if (root / "data" / "PG_VERSION").is_file():
            cluster = Cluster(root)
            if cluster.pid() is None:
                raise ClusterError(f"the database of `cronbox dev` in {root} is not running: start `cronbox dev` "
                                   "there, or set DATABASE_URL")
            return cluster
    return None
