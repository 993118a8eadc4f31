"""Console access: who may log in, as which database role.

CRONBOX_WEB_USERS is a comma- or newline-separated list of `user:hash:dbrole` entries. The
hash is `pbkdf2_sha256$<iterations>$<salt hex>$<digest hex>` or
`scrypt$<n>$<r>$<p>$<salt hex>$<digest hex>`, made with `cronbox web --hash-password`.
Every request of that user runs its SQL under `SET LOCAL ROLE dbrole`, so the database's
grants and row-level security decide what the user sees and may do.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

from cronbox.config import ConfigError

_ROLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]{0,62}$")
_USER = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")
PBKDF2_ITERATIONS = 600_000
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1
# One scrypt check holds 128 * r * (n + 2 + p) bytes; the console accepts n * r up to 2**20
# (128 MiB per check, 16 MiB at the defaults) and passes OpenSSL exactly the memory needed.
SCRYPT_MAX_NR = 2**20


@dataclass(frozen=True)
class User:
    name: str
    hash: str
    role: str


def hash_password(password: str, *, scheme: str = "scrypt") -> str:
    """A salted hash for CRONBOX_WEB_USERS (hashlib only; no plain passwords in the env)."""
    if not password:
        raise ConfigError("password: must not be empty")
    salt = secrets.token_bytes(16)
    if scheme == "pbkdf2_sha256":
        digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, PBKDF2_ITERATIONS)
        return f"pbkdf2_sha256${PBKDF2_ITERATIONS}${salt.hex()}${digest.hex()}"
    digest = hashlib.scrypt(password.encode(), salt=salt, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P, dklen=32)
    return f"scrypt${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${salt.hex()}${digest.hex()}"


def _check_hash_format(text: str) -> None:
    parts = text.split("$")
    try:
        if parts[0] == "pbkdf2_sha256" and len(parts) == 4:
            iterations = int(parts[1])
            bytes.fromhex(parts[2]), bytes.fromhex(parts[3])
            if iterations < 100_000:
                raise ConfigError("CRONBOX_WEB_USERS: pbkdf2_sha256 needs at least 100000 iterations")
            return
        if parts[0] == "scrypt" and len(parts) == 6:
            n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
            bytes.fromhex(parts[4]), bytes.fromhex(parts[5])
            if n < 2**14 or n > 2**20 or n & (n - 1) or not (1 <= r <= 32 and 1 <= p <= 16):
                raise ConfigError("CRONBOX_WEB_USERS: scrypt needs n a power of 2 in 16384-1048576, r 1-32, p 1-16")
            if n * r > SCRYPT_MAX_NR:
                raise ConfigError(f"CRONBOX_WEB_USERS: scrypt n={n} r={r} needs {128 * n * r >> 20} MiB per login; "
                                  f"at most 128 MiB (n * r <= {SCRYPT_MAX_NR})")
            if n >= 2 ** (16 * r):  # OpenSSL refuses it (RFC 7914: n < 2^(128 * r / 8))
                raise ConfigError(f"CRONBOX_WEB_USERS: scrypt n={n} needs r >= {n.bit_length() // 16 + 1}")
            return
    except ConfigError:
        raise
    except ValueError:
        pass
    raise ConfigError("CRONBOX_WEB_USERS: a hash must look like scrypt$n$r$p$salt$digest or "
                      "pbkdf2_sha256$iterations$salt$digest (make one with `cronbox web --hash-password`)")


def verify_password(password: str, stored: str) -> bool:
    parts = stored.split("$")
    if parts[0] == "pbkdf2_sha256":
        got = hashlib.pbkdf2_hmac("sha256", password.encode(), bytes.fromhex(parts[2]), int(parts[1]))
        return hmac.compare_digest(got, bytes.fromhex(parts[3]))
    want = bytes.fromhex(parts[5])
    got = hashlib.scrypt(password.encode(), salt=bytes.fromhex(parts[4]), n=int(parts[1]), r=int(parts[2]),
                         p=int(parts[3]), dklen=len(want), maxmem=_scrypt_memory(parts))
    return hmac.compare_digest(got, want)


def _scrypt_memory(parts: list[str]) -> int:
    n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
    return 128 * r * (n + 2 + p) + 65536


def parse_users(text: str) -> dict[str, User]:
    users: dict[str, User] = {}
    for entry in re.split(r"[,\n]", text or ""):
        entry = entry.strip()
        if not entry:
            continue
        name, _, rest = entry.partition(":")
        hashed, _, role = rest.rpartition(":")
        if not _USER.match(name):
            raise ConfigError(f"CRONBOX_WEB_USERS: bad user name {name[:64]!r} (letters, digits, _.@-, at most 64)")
        if not hashed or not _ROLE.match(role):
            raise ConfigError(f"CRONBOX_WEB_USERS: entry for {name!r} must be user:hash:dbrole with a plain role name")
        _check_hash_format(hashed)
        if name in users:
            raise ConfigError(f"CRONBOX_WEB_USERS: user {name!r} is listed twice")
        users[name] = User(name, hashed, role)
    return users


def basic_credentials(header: str | None) -> tuple[str, str] | None:
    if not header or not header.startswith("Basic "):
        return None
    try:
        raw = base64.b64decode(header[6:].strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    name, sep, password = raw.partition(":")
    return (name, password) if sep else None


class Authenticator:
    """Checks HTTP Basic credentials; remembers good ones briefly (scrypt costs ~50-100 ms).
    `known` is the cheap lookup for the event loop; `verify` is the slow check, run in an
    executor (web.guard.LoginGate)."""

    def __init__(self, users: dict[str, User]):
        self.users = users
        self._ok: dict[tuple[str, bytes], User] = {}

    @staticmethod
    def _key(creds: tuple[str, str]) -> tuple[str, bytes]:
        return creds[0], hashlib.sha256(creds[1].encode()).digest()

    def known(self, creds: tuple[str, str]) -> User | None:
        return self._ok.get(self._key(creds))

    def verify(self, creds: tuple[str, str]) -> User | None:
        name, password = creds
        user = self.users.get(name)
        if user is None or not verify_password(password, user.hash):
            return None
        if len(self._ok) > 1000:
            self._ok.clear()
        self._ok[self._key(creds)] = user
        return user
