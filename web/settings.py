"""The console's settings: CRONBOX_WEB_HOST/PORT (or --host/--port) and CRONBOX_WEB_USERS.

Loopback by default; any other address is refused unless users are configured."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from cronbox.config import ConfigError, env_int
from web.auth import User, parse_users


@dataclass(frozen=True)
class WebSettings:
    host: str = "127.0.0.1"
    port: int = 8088
    users: dict[str, User] = field(default_factory=dict)
    refresh: int = 5  # seconds between live refreshes (JavaScript only)
    secret: bytes | None = None  # CSRF token key; None: random per process
    pool: int = 4  # database connections

    @property
    def auth(self) -> bool:
        return bool(self.users)

    def describe(self) -> dict[str, object]:
        return {"host": self.host, "port": self.port, "auth": "basic" if self.auth else "none (loopback only)",
                "users": sorted(self.users), "csrf_secret": "set" if self.secret else "random per process"}


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def from_env(env: Mapping[str, str] | None = None, *, host: str | None = None, port: int | None = None) -> WebSettings:
    env = os.environ if env is None else env
    host = host or env.get("CRONBOX_WEB_HOST") or "127.0.0.1"
    if port is None:
        port = env_int(env, "CRONBOX_WEB_PORT", 8088, minimum=0)
    if not 0 <= port <= 65535:
        raise ConfigError(f"CRONBOX_WEB_PORT: {port} is not a TCP port (0-65535)")
    users = parse_users(env.get("CRONBOX_WEB_USERS", ""))
    if not users and not is_loopback(host):
        raise ConfigError(f"refusing to listen on {host}: set CRONBOX_WEB_USERS (user:hash:dbrole) to require "
                          "logins, or bind 127.0.0.1")
    refresh = env_int(env, "CRONBOX_WEB_REFRESH", 5, minimum=1)
    secret = env.get("CRONBOX_WEB_SECRET") or None
    if secret is not None and len(secret) < 32:
        raise ConfigError("CRONBOX_WEB_SECRET: at least 32 characters (it signs the CSRF tokens)")
    return WebSettings(host=host, port=port, users=users, refresh=refresh,
                       secret=secret.encode() if secret else None, pool=env_int(env, "CRONBOX_WEB_POOL", 4))
