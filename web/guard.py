"""What the console checks before it trusts a request: the Host and Origin it was sent to (a
DNS-rebinding page must not read or drive a loopback console), the scheme and client as a
trusted TLS proxy reports them, and logins (the password check runs off the event loop, a few
at a time, and a client that keeps failing is refused for a while)."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from aiohttp import web

from web.auth import Authenticator, User, basic_credentials
from web.settings import WebSettings, is_loopback

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def host_name(value: str) -> str:
    """The host of a Host header or an origin's authority, without port, lower case."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    if value.count(":") == 1:
        value = value.partition(":")[0]
    return value.rstrip(".")


def allowed_hosts(settings: WebSettings) -> frozenset[str] | None:
    """Host names the console answers to; None: any (a non-loopback bind without a list,
    where logins are required and a rebinding page has no credentials)."""
    listed = {host_name(h) for h in settings.allowed_hosts.replace(",", " ").split()}
    if is_loopback(settings.host):
        return frozenset({*LOOPBACK_NAMES, host_name(settings.host), *listed})
    if listed:
        return frozenset({*listed, host_name(settings.host)})
    return None


def scheme(request: web.Request, settings: WebSettings) -> str:
    if settings.behind_proxy:
        forwarded = request.headers.get("X-Forwarded-Proto", "").split(",")[0].strip().lower()
        if forwarded in ("http", "https"):
            return forwarded
    return request.scheme


def public_host(request: web.Request, settings: WebSettings) -> str:
    """host[:port] as the browser addressed it (behind a trusted proxy: X-Forwarded-Host)."""
    if settings.behind_proxy and request.headers.get("X-Forwarded-Host"):
        return request.headers["X-Forwarded-Host"].split(",")[0].strip()
    return request.host


def client(request: web.Request, settings: WebSettings) -> str:
    """The client's address; behind a trusted proxy, the one the proxy appended last."""
    if settings.behind_proxy and request.headers.get("X-Forwarded-For"):
        return request.headers["X-Forwarded-For"].split(",")[-1].strip()
    return request.remote or "?"


def host_problem(request: web.Request, settings: WebSettings, allowed: frozenset[str] | None) -> str | None:
    """Why this request's Host or Origin is refused (DNS rebinding), or None."""
    host = public_host(request, settings)
    if allowed is not None and host_name(host) not in allowed:
        return f"Host {host[:100]!r} is not one this console answers to"
    origin = request.headers.get("Origin")
    if origin and origin != "null":
        authority = origin.split("://", 1)[-1]
        if allowed is not None and host_name(authority) not in allowed:
            return f"Origin {origin[:100]!r} is not one this console answers to"
        if request.method not in ("GET", "HEAD") and authority.lower() != host.lower():
            return "the form came from another site"
    return None


def _lower_priority() -> None:
    """Password checks yield the CPU to the event loop (Linux: a thread has its own nice value)."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    except (AttributeError, OSError):
        pass


class LoginGate:
    """HTTP Basic logins without stalling the event loop: known good credentials are a dict
    lookup; anything else is checked by scrypt/PBKDF2 in threads of lower priority, at most
    `concurrency` at a time and at most `backlog` waiting. A client has at most `per_minute`
    unsuccessful attempts in any minute (in flight ones count), then gets 429 until the
    oldest is a minute old. Counters are in memory, per console process."""

    WINDOW = 60.0
    MAX_CLIENTS = 10_000

    def __init__(self, auth: Authenticator, *, concurrency: int, backlog: int, per_minute: int):
        self.auth = auth
        self.sem = asyncio.Semaphore(concurrency)
        self.pool = ThreadPoolExecutor(concurrency, thread_name_prefix="cronbox-login", initializer=_lower_priority)
        self.backlog = backlog
        self.per_minute = per_minute
        self.pending = 0
        self.attempts: dict[str, deque[float]] = {}

    def _recent(self, who: str, now: float) -> deque[float]:
        times = self.attempts.get(who)
        if times is None:
            if len(self.attempts) >= self.MAX_CLIENTS:
                self._prune(now)
            times = self.attempts[who] = deque()
        while times and times[0] <= now - self.WINDOW:
            times.popleft()
        return times

    def _prune(self, now: float) -> None:
        for who in [w for w, t in self.attempts.items() if not t or t[-1] <= now - self.WINDOW]:
            del self.attempts[who]
        if len(self.attempts) >= self.MAX_CLIENTS:  # a flood from many addresses: forget the oldest half
            for who in sorted(self.attempts, key=lambda w: self.attempts[w][-1])[: self.MAX_CLIENTS // 2]:
                del self.attempts[who]

    async def check(self, header: str | None, who: str) -> User | None | float:
        """The user, None (no or wrong credentials: 401) or seconds to wait (429)."""
        creds = basic_credentials(header)
        if creds is None:
            return None
        user = self.auth.known(creds)
        if user is not None:
            return user
        now = time.monotonic()
        times = self._recent(who, now)
        if len(times) >= self.per_minute:
            return max(1.0, times[0] + self.WINDOW - now)
        if self.pending >= self.backlog:
            return 1.0
        times.append(now)
        self.pending += 1
        try:
            async with self.sem:
                user = await asyncio.get_running_loop().run_in_executor(self.pool, self.auth.verify, creds)
        finally:
            self.pending -= 1
        if user is not None:
            try:
                times.remove(now)  # a success does not count against the client
            except ValueError:
                pass
        return user

