"""The private PostgreSQL helper: find binaries, init, start, reuse, stop; as root it runs
only PostgreSQL itself as the postgres OS user."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from cronbox import db
from cronbox.pgcluster import INSTALL_HINT, Cluster, PgNotFound, find_bindir

from .conftest import cronbox_cmd
from .procs import wait_until


def _owner_of(pid: int) -> int:
    return os.stat(f"/proc/{pid}").st_uid


def test_start_reuse_and_stop_a_private_cluster(open_folder: Path):
    tmp_path = open_folder
    cluster = Cluster(tmp_path / "pg", settings={"fsync": "off"})
    dsn = cluster.start()
    try:
        pid = cluster.pid()
        assert pid is not None
        with db.connect(dsn) as conn:
            assert conn.execute("SHOW listen_addresses").fetchone()[0] == "127.0.0.1"
            conn.execute("CREATE TABLE kept (x int)")
        if os.geteuid() == 0:
            import pwd
            assert _owner_of(pid) == pwd.getpwnam("postgres").pw_uid  # never root
        # A second helper on the same folder reuses the running server.
        again = Cluster(tmp_path / "pg")
        assert again.start() == dsn and again.pid() == pid
    finally:
        cluster.stop()
    assert cluster.pid() is None
    # Data survives a restart.
    dsn = cluster.start()
    try:
        with db.connect(dsn) as conn:
            assert conn.execute("SELECT to_regclass('public.kept') IS NOT NULL").fetchone()[0]
    finally:
        cluster.stop()


def _gone(pid: int) -> bool:
    """Exited: no such process, or a zombie its new parent has not reaped yet."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


@pytest.mark.skipif(os.geteuid() != 0, reason="as root only the server runs as the postgres user")
def test_stop_works_after_an_ancestor_folder_was_closed_to_the_postgres_user(open_folder: Path):
    # what any pytest run starting on the machine does to /tmp/pytest-of-root: the server keeps
    # running (it works inside its data folder), and stopping it must not need that path
    cluster = Cluster(open_folder / "closed" / "pg", settings={"fsync": "off"})
    cluster.start()
    pid = cluster.pid()
    assert pid is not None
    os.chmod(open_folder / "closed", 0o700)
    try:
        cluster.stop()
        assert cluster.pid() is None and _gone(pid)
    finally:
        os.chmod(open_folder / "closed", 0o755)
        cluster.stop(mode="immediate")


def test_missing_binaries_give_one_clear_line(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("CRONBOX_PG_BINDIR", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))  # no pg_config, no initdb
    import cronbox.pgcluster as pc
    monkeypatch.setattr(pc.Path, "glob", lambda self, pattern: iter(()), raising=True)
    with pytest.raises(PgNotFound) as err:
        find_bindir()
    assert str(err.value) == INSTALL_HINT and "DATABASE_URL" in INSTALL_HINT


def _get(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.read().decode()
    except OSError:
        return None


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder the postgres user can reach for the whole test. Not under pytest's basetemp:
    any pytest run starting on this machine resets /tmp/pytest-of-<user> to 0700, which cuts
    the postgres user off from a cluster below it in the middle of a test."""
    path = Path(tempfile.mkdtemp(prefix="cronbox-dev-test-"))
    os.chmod(path, 0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _tree(pid: int) -> str:
    return subprocess.run(["ps", "-o", "pid,ppid,pgid,stat,etime,args", "--ppid", str(pid), "-p", str(pid)],
                          capture_output=True, text=True).stdout


@pytest.mark.slow
def test_cronbox_dev_runs_the_pipeline_then_ctrl_c_leaves_no_postgres_behind(open_folder: Path):
    """Also: routes added with --sink run beside the demo's; `cronbox status` run below the
    folder finds the running dev database; Ctrl-C stops poller, relay, then the worker (no send
    fails on the way out); the console and the DSN keep their ports across runs."""
    tmp_path = open_folder
    data = tmp_path / ".cronbox"
    (tmp_path / "src").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "DATABASE_URL", "CRONBOX_"))}
    log = tmp_path / "dev.log"

    def run_once(expect_completed: int, *extra: str) -> str:
        with open(log, "wb") as out:
            # Its own session, so the SIGINT below goes to its process group as a terminal's
            # Ctrl-C does (the foreground group), and to nothing else of this test run.
            proc = subprocess.Popen(cronbox_cmd("dev", "--cron", "* * * * * *", *extra), cwd=tmp_path,
                                    env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_until(lambda: log.read_text().count("completed") >= expect_completed, timeout=60,
                       what="demo runs completed")
            # it also serves the web console and prints its URL
            url = re.search(r"web console at (http://127\.0\.0\.1:\d+/)", log.read_text()).group(1)
            page = wait_until(lambda: _get(url), timeout=30, what="the web console answering")
            assert "Overview" in page and "demo" in wait_until(lambda: _get(url + "schedules"), timeout=10)
            if extra:
                with db.connect(dsn_of(log.read_text()), autocommit=True) as conn:
                    conn.execute("SELECT cronbox.schedule('mine', every => '1 second', queue => 'extra')")
                wait_until(lambda: "job=mine queue=extra" in log.read_text(), timeout=30, what="the added route used")
                status = subprocess.run(cronbox_cmd("status"), cwd=tmp_path / "src", env=env,
                                        capture_output=True, text=True, timeout=60)
                assert status.returncode == 0 and "mine" in status.stdout and "demo" in status.stdout, status
                assert "using the database of `cronbox dev`" in status.stderr
            os.killpg(proc.pid, signal.SIGINT)
            # a bound for a hang, not a measure: each child may take CRONBOX_SHUTDOWN_TIMEOUT (10 s)
            try:
                code = proc.wait(90)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"cronbox dev did not stop:\n{_tree(proc.pid)}\n{log.read_text()[-4000:]}") from None
            assert code == 0, log.read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
        return log.read_text()

    def dsn_of(text: str) -> str:
        return re.search(r"dsn=(\S+)", text).group(1)

    def console_of(text: str) -> str:
        return re.search(r"web console at (\S+)", text).group(1)

    first = run_once(2, "--sink", "extra=log")
    assert "received" in first and "completed" in first
    # Ctrl-C is one graceful stop for every process: no child took a second signal.
    assert "second signal" not in first and "cancelling" not in first, first
    assert first.count("stopped process=poller") == 1 and first.count("stopped process=relay") == 1, first
    order = [first.index(s) for s in ("stopped process=poller", "stopped process=relay", "demo worker stopped")]
    assert order == sorted(order), first
    assert "sends failed" not in first and "Cannot connect" not in first, first
    assert "reused=False" in first
    cluster = Cluster(data)
    left = cluster.pid()
    assert left is None, (subprocess.run(["ps", "-o", "pid,ppid,pgid,stat,args", "-p", str(left)], capture_output=True,
                                         text=True).stdout, first[-3000:])
    assert not (data / "data" / "postmaster.pid").exists()
    stopped = subprocess.run(cronbox_cmd("status"), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert stopped.returncode == 1 and "not running" in stopped.stderr and stopped.stderr.count("\n") == 1
    # The next `cronbox dev` picks up the same data (earlier runs are still there) on the same
    # port, and serves the console on the same port.
    second = run_once(1)
    assert "reused=True" in second and "already_running=False" in second
    assert dsn_of(second) == dsn_of(first) and console_of(second) == console_of(first)
    dsn = cluster.start()
    try:
        with db.connect(dsn) as conn:
            n = conn.execute("SELECT count(*) FROM cronbox.runs WHERE state = 'succeeded'").fetchone()[0]
        assert n >= 3
    finally:
        cluster.stop()
