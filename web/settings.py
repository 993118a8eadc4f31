"""The console's settings (CRONBOX_WEB_*; --host/--port override the first two), declared once:
parsed, validated and logged from these fields, and listed by `cronbox web --help`.

Loopback by default; any other address is refused unless users are configured."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass

from cronbox.config import ConfigError, Settings, choice, integer, setting, stripped, text
from web.auth import User, parse_users


def _users(name: str, value: str) -> dict[str, User]:
    return parse_users(value)
_users.kind = "users"  # type: ignore[attr-defined]


def _secret(name: str, value: str) -> bytes | None:
    if not value:
        return None
    if len(value) < 32:
        raise ConfigError(f"{name}: at least 32 characters (it signs the CSRF tokens)")
    return value.encode()
_secret.kind = "secret"  # type: ignore[attr-defined]


@dataclass(frozen=True)
class WebSettings(Settings):
    host: str = setting("CRONBOX_WEB_HOST", "127.0.0.1", text(),
                        "address to bind (--host); any but loopback requires CRONBOX_WEB_USERS")
    port: int = setting("CRONBOX_WEB_PORT", "8088", integer(0, 65535), "port (--port; 0 = any free port)")
    users: dict[str, User] = setting("CRONBOX_WEB_USERS", "", _users,
                                     "logins, user:hash:dbrole separated by commas (hash: cronbox web "
                                     "--hash-password); each user acts as its database role", secret=True)
    refresh: int = setting("CRONBOX_WEB_REFRESH", "5", integer(), "seconds between live refreshes of a page")
    secret: bytes | None = setting("CRONBOX_WEB_SECRET", "", _secret,
                                   "key of the CSRF tokens, 32+ characters (unset: random per process)", secret=True)
    pool: int = setting("CRONBOX_WEB_POOL", "4", integer(), "database connections")
    allowed_hosts: str = setting("CRONBOX_WEB_ALLOWED_HOSTS", "", stripped(),
                                 "host names browsers use to reach the console, comma-separated (loopback "
                                 "names are always allowed on a loopback bind); other Host/Origin headers get 403")
    trust_proxy: str = setting("CRONBOX_WEB_TRUST_PROXY", "no", choice("no", "yes"),
                               "yes: behind a TLS proxy, trust its X-Forwarded-Proto/-Host/-For (Secure cookies "
                               "over https, the client address for login limits)")
    login_failures: int = setting("CRONBOX_WEB_LOGIN_FAILURES", "10", integer(1, 1000),
                                  "unsuccessful logins per client per minute before 429")

    @property
    def auth(self) -> bool:
        return bool(self.users)

    @property
    def behind_proxy(self) -> bool:
        return self.trust_proxy == "yes"

    def check(self) -> None:
        if not self.users and not is_loopback(self.host):
            raise ConfigError(f"refusing to listen on {self.host}: set CRONBOX_WEB_USERS (user:hash:dbrole) to "
                              "require logins, or bind 127.0.0.1")

    def describe(self) -> dict[str, object]:
        return {"host": self.host, "port": self.port, "auth": "basic" if self.auth else "none (loopback only)",
                "users": sorted(self.users), "csrf_secret": "set" if self.secret else "random per process",
                "allowed_hosts": self.allowed_hosts or ("loopback names" if is_loopback(self.host) else "any"),
                "trust_proxy": self.trust_proxy, "login_failures": self.login_failures}


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def from_env(env: Mapping[str, str] | None = None, *, host: str | None = None, port: int | None = None) -> WebSettings:
    if port is not None and not 0 <= port <= 65535:
        raise ConfigError(f"--port: {port} is not a TCP port (0-65535)")
    return WebSettings.from_env(env, host=host or None, port=port)
