"""Helpers for tests that run the real `cronbox` processes."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from cronbox.pgcluster import free_port

from .conftest import cronbox_cmd

T = TypeVar("T")


class Proc:
    """A `cronbox <command>` child process with its output captured to a file."""

    def __init__(self, command: str, dsn: str, tmp: Path, **env: str):
        self.command = command
        self.log = tmp / f"{command}-{time.monotonic_ns()}.log"
        full_env = {**os.environ, "DATABASE_URL": dsn, "CRONBOX_POLL_INTERVAL": "200ms", **env}
        for k in ("PGHOST", "PGDATABASE", "PGPORT", "PGUSER"):
            full_env.pop(k, None)
        extra = env.pop("_args", "")
        with open(self.log, "wb") as out:
            self.popen = subprocess.Popen(cronbox_cmd(command, *extra.split()), env=full_env,
                                          stdout=out, stderr=subprocess.STDOUT)

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def terminate(self, timeout: float = 20) -> int:
        """SIGTERM and wait; returns the exit code."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
            raise AssertionError(f"{self.command} did not stop within {timeout}s:\n{self.output}") from None

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait()

    def __enter__(self) -> Proc:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


def demo_worker(dsn: str, tmp: Path) -> tuple[Proc, int]:
    port = free_port()
    return Proc("demo-worker", dsn, tmp, _args=f"--port {port}"), port


def wait_until(check: Callable[[], T], timeout: float = 30, what: str = "condition") -> T:
    """Poll an observable condition until it holds (or fail after timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {result!r})")
        time.sleep(0.05)


def http_get(port: int, path: str = "/healthz") -> tuple[int, str]:
    """(status, body) of a GET on 127.0.0.1:port (a process's /healthz by default); (0, the
    error) when nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return 0, str(e)
