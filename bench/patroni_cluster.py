"""A Patroni cluster on this machine, as operators run one: etcd (the DCS), two Patroni nodes
(a primary and a synchronous standby, `synchronous_mode: true`) and, optionally, HAProxy in
front routing to whichever node Patroni's REST API calls the primary (`GET /primary`).

Debian's `patroni`, `etcd-server` and `haproxy` packages (`.ci/run` installs them). Everything
listens on 127.0.0.1 on free ports and runs as the `postgres` OS user when we are root
(PostgreSQL refuses root). Used by bench/patroni.py and tests/test_patroni.py.

The changes an HA cluster goes through, each waiting until it is done:
- `switchover()`: `patronictl switchover` to the standby (planned);
- `kill_postmaster()`: SIGKILL of the primary's postmaster; with `primary_start_timeout: 0`
  Patroni fails over to the synchronous standby instead of restarting it in place;
- `freeze()` / `thaw()`: SIGSTOP of the primary's Patroni (a node cut off from etcd that keeps
  believing it leads, its PostgreSQL still up) until its leader key expires and the standby is
  promoted; SIGCONT makes it find it lost the key and demote itself;
- `converged()`: the old primary rejoined (pg_rewind by Patroni when it diverged) and streams
  as the synchronous standby again.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import psycopg

from cronbox import db
from cronbox.pgcluster import find_bindir, free_port

PATRONI = shutil.which("patroni") or "/usr/bin/patroni"
PATRONICTL = shutil.which("patronictl") or "/usr/bin/patronictl"
ETCD = shutil.which("etcd") or "/usr/bin/etcd"
HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"

# Patroni's timing: the leader key lives `ttl` seconds and is renewed every `loop_wait`;
# `retry_timeout` bounds a DCS or PostgreSQL call (loop_wait + 2 * retry_timeout <= ttl).
# Shorter than Patroni's defaults (30/10/10) so a failover of a frozen primary fits a test.
TIMING = {"ttl": 12, "loop_wait": 2, "retry_timeout": 5}
# Durable and small: the machine is shared.
PG_PARAMETERS = {
    "fsync": "on", "synchronous_commit": "on", "full_page_writes": "on",
    "shared_buffers": "32MB", "max_connections": "200", "max_wal_senders": "10",
    "max_replication_slots": "10", "wal_level": "replica", "hot_standby": "on", "wal_log_hints": "on",
    "wal_keep_size": "256MB", "wal_receiver_status_interval": "1s", "hot_standby_feedback": "on",
    "recovery_init_sync_method": "syncfs",
    # TCP only: a socket file in the data folder breaks pg_rewind (it copies the folder)
    "unix_socket_directories": "",
}


def available() -> str | None:
    """None when Patroni, etcd, HAProxy and PgBouncer are installed, else what is missing."""
    missing = [p for p in (PATRONI, PATRONICTL, ETCD, HAPROXY, PGBOUNCER) if not Path(p).exists()]
    return (f"not installed: {', '.join(missing)} (.ci/run installs patroni, etcd-server, haproxy, pgbouncer)"
            if missing else None)


def _as_postgres() -> dict[str, Any]:
    if os.geteuid() != 0:
        return {}
    pw = pwd.getpwnam("postgres")
    return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}


def _own(path: Path) -> None:
    if os.geteuid() == 0:
        pw = pwd.getpwnam("postgres")
        os.chown(path, pw.pw_uid, pw.pw_gid)


def _dump(data: Any) -> str:
    """YAML is a superset of JSON: Patroni reads this."""
    return json.dumps(data, indent=1)


class Daemon:
    """A long-running child (etcd, Patroni, HAProxy) with its output in one log file, stopped by
    its pid."""

    def __init__(self, name: str, argv: list[str], root: Path, env: dict[str, str] | None = None):
        self.name, self.argv, self.root = name, argv, root
        self.logfile = root / f"{name}.log"
        self.env = {**os.environ, "HOME": str(root), **(env or {})}
        self.popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.logfile, "ab") as out:
            self.popen = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, cwd=self.root,
                                          env=self.env, **_as_postgres())

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def signal(self, sig: int) -> None:
        if self.running():
            os.kill(self.pid, sig)

    def stop(self, timeout: float = 30) -> None:
        if not self.running():
            return
        assert self.popen is not None
        self.signal(signal.SIGCONT)
        self.popen.terminate()
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()

    def log_size(self) -> int:
        try:
            return self.logfile.stat().st_size
        except OSError:
            return 0

    def log_since(self, offset: int) -> str:
        with open(self.logfile, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")


def wait_for(cond, timeout: float, what: str, interval: float = 0.2) -> float:
    t0 = time.monotonic()
    while True:
        got = cond()
        if got:
            return time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {what} (last: {got!r})")
        time.sleep(interval)


class Node:
    """One Patroni node and the PostgreSQL it runs."""

    def __init__(self, root: Path, name: str, scope: str, etcd_port: int, bindir: Path):
        self.name, self.root = name, root / name
        self.root.mkdir(parents=True, exist_ok=True)
        _own(self.root)
        self.data = self.root / "data"
        self.pg_port, self.rest_port = free_port(), free_port()
        self.config = self.root / "patroni.yml"
        self.config.write_text(_dump(self.settings(scope, etcd_port, bindir)))
        _own(self.config)
        self.patroni = Daemon("patroni", [PATRONI, str(self.config)], self.root)

    def settings(self, scope: str, etcd_port: int, bindir: Path) -> dict[str, Any]:
        superuser = {"username": "postgres", "password": "postgres"}
        return {
            "scope": scope, "name": self.name,
            "log": {"level": "INFO"},
            "restapi": {"listen": f"127.0.0.1:{self.rest_port}", "connect_address": f"127.0.0.1:{self.rest_port}"},
            # etcd's v2 API: Patroni 3.0.2's etcd3 code can take the leader key back after a hang
            # (a stale view, then an unconditional write: fixed in 3.0.3); v2 writes it by CAS
            "etcd": {"hosts": [f"127.0.0.1:{etcd_port}"]},
            "bootstrap": {
                "dcs": {**TIMING, "maximum_lag_on_failover": 1048576, "synchronous_mode": True,
                        "primary_start_timeout": 0,
                        "postgresql": {"use_pg_rewind": True, "use_slots": True, "parameters": PG_PARAMETERS}},
                "initdb": [{"encoding": "UTF8"}, {"locale": "C"}, {"auth": "trust"}, "no-sync"],
            },
            "postgresql": {
                "listen": f"127.0.0.1:{self.pg_port}", "connect_address": f"127.0.0.1:{self.pg_port}",
                "data_dir": str(self.data), "bin_dir": str(bindir), "pgpass": str(self.root / "pgpass"),
                "authentication": {"superuser": superuser, "replication": superuser, "rewind": superuser},
                "parameters": {"unix_socket_directories": ""},
                "pg_hba": ["local all all trust", "host all all 127.0.0.1/32 trust",
                           "host replication all 127.0.0.1/32 trust"],
            },
            "watchdog": {"mode": "off"},
            "tags": {"nofailover": False, "noloadbalance": False, "clonefrom": False, "nosync": False},
        }

    def dsn(self, dbname: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.pg_port} user=postgres dbname={dbname}"

    def rest(self, path: str, timeout: float = 2.0) -> tuple[int, Any]:
        """(status, JSON body) of a GET on this node's REST API; (0, None) when it does not
        answer (stopped, or frozen)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.rest_port}{path}", timeout=timeout) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            try:
                return e.code, json.loads(e.read() or b"null")
            except ValueError:
                return e.code, None
        except (OSError, ValueError):
            return 0, None

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return None

    def is_primary(self) -> bool:
        return self.rest("/primary")[0] == 200

    def stop_postgres(self) -> None:
        """After Patroni: a postmaster left behind (Patroni killed) is stopped by its pid."""
        pid = self.postmaster_pid()
        if pid:
            try:
                os.kill(pid, signal.SIGQUIT)
            except ProcessLookupError:
                return
            for _ in range(100):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    return
                time.sleep(0.1)


class HAProxy:
    """HAProxy in TCP mode on one port: to the node whose Patroni answers 200 on GET /primary
    (checked every second, down after 2 failures); sessions to a node marked down are cut, so
    clients reconnect to the new primary."""

    def __init__(self, root: Path, nodes: list[Node]):
        self.port = free_port()
        cfg = root / "haproxy.cfg"
        servers = "\n".join(
            f"    server {n.name} 127.0.0.1:{n.pg_port} maxconn 400 check port {n.rest_port}" for n in nodes)
        cfg.write_text(f"""global
    maxconn 1000
defaults
    mode tcp
    retries 1
    timeout connect 2s
    timeout client 1h
    timeout server 1h
    timeout check 1s
listen cronbox_primary
    bind 127.0.0.1:{self.port}
    option httpchk OPTIONS /primary
    http-check expect status 200
    default-server inter 1s fall 2 rise 1 on-marked-down shutdown-sessions
{servers}
""")
        _own(cfg)
        self.daemon = Daemon("haproxy", [HAPROXY, "-db", "-f", str(cfg)], root)

    def start(self) -> None:
        self.daemon.start()

    def stop(self) -> None:
        self.daemon.stop()


class PgBouncer:
    """PgBouncer in transaction mode pinned to one node, as a pooler on that node's host is:
    after a failover it still hands out that server, now a standby."""

    def __init__(self, root: Path, node: Node):
        self.port = free_port()
        root = root / f"pgbouncer-{node.name}"
        root.mkdir(exist_ok=True)
        (root / "users.txt").write_text('"postgres" ""\n')
        (root / "pgbouncer.ini").write_text(f"""[databases]
* = host=127.0.0.1 port={node.pg_port}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
auth_type = trust
auth_file = {root}/users.txt
pool_mode = transaction
max_client_conn = 200
default_pool_size = 20
ignore_startup_parameters = extra_float_digits,options
""")
        for f in (root, root / "users.txt", root / "pgbouncer.ini"):
            _own(f)
        self.daemon = Daemon("pgbouncer", [PGBOUNCER, str(root / "pgbouncer.ini")], root)

    def start(self) -> None:
        self.daemon.start()

    def stop(self) -> None:
        self.daemon.stop()


class PatroniCluster:
    """etcd, two Patroni nodes, HAProxy in front; `start()` returns once there is a primary
    with a synchronous standby streaming."""

    def __init__(self, root: Path, scope: str = "cronbox"):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        root.chmod(0o755)
        _own(root)
        if os.geteuid() == 0:  # the postgres user must reach it: search permission on each ancestor
            for parent in root.parents:
                if not parent.stat().st_mode & 0o001:
                    parent.chmod(parent.stat().st_mode | 0o001)
        bindir = find_bindir()
        self.etcd_port, etcd_peer = free_port(), free_port()
        (root / "etcd").mkdir(exist_ok=True)
        _own(root / "etcd")
        self.etcd = Daemon("etcd", [
            ETCD, "--name", "etcd0", "--data-dir", str(root / "etcd" / "data"),
            "--listen-client-urls", f"http://127.0.0.1:{self.etcd_port}",
            "--advertise-client-urls", f"http://127.0.0.1:{self.etcd_port}",
            "--listen-peer-urls", f"http://127.0.0.1:{etcd_peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{etcd_peer}",
            "--initial-cluster", f"etcd0=http://127.0.0.1:{etcd_peer}",
            "--enable-v2", "--logger", "zap", "--log-level", "warn"], root / "etcd")
        self.nodes = [Node(root, n, scope, self.etcd_port, bindir) for n in ("nodea", "nodeb")]
        self.haproxy = HAProxy(root, self.nodes)

    # ---------------------------------------------------------------------------- lifecycle
    def start(self, timeout: float = 180) -> None:
        self.etcd.start()
        wait_for(self._etcd_up, 30, "etcd answering")
        a, b = self.nodes
        a.patroni.start()  # bootstraps the cluster (initdb) and takes the leader key
        wait_for(a.is_primary, timeout, "nodea bootstrapped as the primary")
        b.patroni.start()  # clones it with pg_basebackup and becomes the synchronous standby
        self.haproxy.start()
        self.converged(timeout)

    def stop(self) -> None:
        self.haproxy.stop()
        for n in self.nodes:
            n.patroni.stop()
        for n in self.nodes:
            n.stop_postgres()
        self.etcd.stop()

    def _etcd_up(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.etcd_port}/health", timeout=2) as r:
                return b"true" in r.read()
        except OSError:
            return False

    # ------------------------------------------------------------------------------- state
    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def members(self) -> list[dict[str, Any]]:
        """The members as Patroni's REST API reports them (from any node that answers)."""
        for n in self.nodes:
            status, body = n.rest("/cluster")
            if status == 200 and body:
                return body.get("members", [])
        return []

    def leader(self) -> Node | None:
        """The node whose Patroni holds the leader key and whose PostgreSQL takes writes."""
        for m in self.members():
            if m.get("role") == "leader" and m.get("state") == "running":
                n = self.node(m["name"])
                if n.is_primary():
                    return n
        return None

    def other(self, node: Node) -> Node:
        return next(n for n in self.nodes if n is not node)

    def _synchronous(self) -> Node | None:
        """The leader when the other node streams from it as the synchronous standby."""
        leader = self.leader()
        if leader is None:
            return None
        roles = {m["name"]: m for m in self.members()}
        standby = roles.get(self.other(leader).name, {})
        if standby.get("role") != "sync_standby" or standby.get("state") not in ("running", "streaming"):
            return None
        try:
            with db.connect(leader.dsn()) as conn:
                row = conn.execute("SELECT count(*) FROM pg_catalog.pg_stat_replication"
                                   " WHERE sync_state = 'sync' AND state = 'streaming'").fetchone()
        except psycopg.OperationalError:
            return None
        return leader if row and row[0] else None

    def converged(self, timeout: float = 180) -> Node:
        """Wait until there is a primary and the other node streams as its synchronous standby;
        returns the primary."""
        found: list[Node] = []

        def ok() -> bool:
            n = self._synchronous()
            if n is not None:
                found.append(n)
            return n is not None
        wait_for(ok, timeout, "a primary with its synchronous standby streaming", interval=0.5)
        return found[-1]

    def multi_host_dsn(self, dbname: str) -> str:
        hosts = ",".join("127.0.0.1" for _ in self.nodes)
        ports = ",".join(str(n.pg_port) for n in self.nodes)
        return (f"host={hosts} port={ports} user=postgres dbname={dbname} "
                "target_session_attrs=read-write connect_timeout=2")

    def haproxy_dsn(self, dbname: str) -> str:
        return (f"host=127.0.0.1 port={self.haproxy.port} user=postgres dbname={dbname} "
                "target_session_attrs=read-write connect_timeout=2")

    # ----------------------------------------------------------------------------- changes
    def _new_leader(self, old: Node, timeout: float) -> float:
        """Seconds until the other node is the primary."""
        new = self.other(old)
        return wait_for(lambda: self.leader() is new, timeout, f"{new.name} promoted")

    def switchover(self, timeout: float = 120) -> dict[str, Any]:
        old = self.converged()
        new = self.other(old)
        t = time.time()
        proc = subprocess.run([PATRONICTL, "-c", str(old.config), "switchover", "--leader", old.name,
                               "--candidate", new.name, "--force"], capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, "HOME": str(self.root)})
        if proc.returncode != 0:
            raise RuntimeError(f"patronictl switchover failed: {proc.stdout}{proc.stderr}")
        promoted = self._new_leader(old, timeout)
        return {"kind": "switchover", "from": old.name, "to": new.name, "t": t, "up_at": time.time(),
                "promoted_s": round(time.time() - t, 3) if promoted is not None else None}

    def kill_postmaster(self, timeout: float = 120) -> dict[str, Any]:
        old = self.converged()
        pid = old.postmaster_pid()
        assert pid, f"no postmaster pid for {old.name}"
        t = time.time()
        os.kill(pid, signal.SIGKILL)
        self._new_leader(old, timeout)
        return {"kind": "kill_postmaster", "from": old.name, "to": self.other(old).name, "t": t,
                "up_at": time.time(), "promoted_s": round(time.time() - t, 3)}

    def freeze(self, hold: float = 3.0, timeout: float = 120) -> dict[str, Any]:
        """SIGSTOP the primary's Patroni; once the standby is promoted, `hold` seconds more of
        two nodes believing they lead (the old one's commits wait for a synchronous standby that
        is gone), then SIGCONT: the old Patroni finds it lost the key and demotes itself."""
        old = self.converged()
        t = time.time()
        old.patroni.signal(signal.SIGSTOP)
        try:
            self._new_leader(old, timeout)
            up_at = time.time()
            time.sleep(hold)
        finally:
            old.patroni.signal(signal.SIGCONT)
        return {"kind": "freeze", "from": old.name, "to": self.other(old).name, "t": t, "up_at": up_at,
                "promoted_s": round(up_at - t, 3), "thawed_at": time.time()}

    def change(self, kind: str, hold: float = 3.0) -> dict[str, Any]:
        """One change, then the old primary rejoined as the synchronous standby (how: the
        Patroni log lines of the node)."""
        old = self.converged()
        offset = old.patroni.log_size()
        f = self.freeze(hold) if kind == "freeze" else {
            "switchover": self.switchover, "kill_postmaster": self.kill_postmaster}[kind]()
        self.converged()
        f["rejoined_s"] = round(time.time() - f["up_at"], 3)
        log = old.patroni.log_since(offset)
        f["rewound"] = "running pg_rewind" in log
        return f
