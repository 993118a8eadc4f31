"""What the console checks before it trusts a request (in-process, real database): the Host
and Origin it was addressed to (DNS rebinding), login floods, password hashes it could not
check, and cookies behind a TLS proxy."""

from __future__ import annotations

import asyncio
import math
import time

import pytest

from cronbox.config import ConfigError
from web.auth import parse_users, verify_password

from .roles import logins  # noqa: F401  (fixture)
from .web_support import basic, consoles, csrf_from, scalar  # noqa: F401  (fixture)

FOREIGN = "rebind.attacker.example"


async def test_a_rebound_host_or_foreign_origin_gets_nothing_and_changes_nothing(consoles):
    client = await consoles({})  # loopback, no logins: the case a rebinding page targets
    port = client.port
    page = await client.get("/schedules/nightly-report")
    assert page.status == 200
    token = csrf_from(await page.text())
    resp = await client.get("/schedules/nightly-report", headers={"Host": f"{FOREIGN}:{port}"})
    body = await resp.text()
    assert resp.status == 403 and "csrf" not in body and "nightly-report" not in body
    assert "Set-Cookie" not in resp.headers
    form = {"csrf": token, "name": "nightly-report", "reason": "rebound"}
    for headers in ({"Host": f"{FOREIGN}:{port}", "Origin": f"http://{FOREIGN}:{port}"},
                    {"Origin": f"http://{FOREIGN}:{port}"}, {"Host": f"{FOREIGN}:{port}"}):
        resp = await client.post("/actions/pause", data=form, headers=headers, allow_redirects=False)
        assert resp.status == 403, (headers, await resp.text())
    assert scalar(consoles.dsn, "SELECT paused FROM cronbox.job WHERE name = 'nightly-report'") is False
    assert scalar(consoles.dsn, "SELECT count(*) FROM cronbox.schedule_changes WHERE action = 'paused'") == 0
    # the loopback names the browser may use are answered, and so are names the operator lists
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"):
        assert (await client.get("/", headers={"Host": host})).status == 200, host
    listed = await consoles({"CRONBOX_WEB_ALLOWED_HOSTS": "console.example, other.example"})
    assert (await listed.get("/", headers={"Host": "Console.Example:8088"})).status == 200
    assert (await listed.get("/", headers={"Host": FOREIGN})).status == 403
    assert (await listed.get("/healthz", headers={"Host": FOREIGN})).status == 200  # load balancers


async def test_healthz_answers_quickly_during_a_wrong_password_flood(consoles):
    """/healthz p99 under 50 ms while 100 wrong passwords arrive at once (before: seconds, each
    scrypt check blocked the event loop). On a machine so loaded that /healthz alone is slower
    than that, the flood may cost at most 3x what the same probes cost without it."""
    client = await consoles()
    times: list[float] = []
    statuses: list[int] = []

    async def wrong(i: int) -> None:
        resp = await client.get("/", headers=basic("admin", f"wrong-{i}"))
        statuses.append(resp.status)
        await resp.release()

    async def probe() -> None:
        start = time.perf_counter()
        resp = await client.get("/healthz")
        assert resp.status == 200
        times.append(time.perf_counter() - start)

    def p99() -> float:
        ordered = sorted(times)
        return ordered[math.ceil(len(ordered) * 0.99) - 1]  # nearest rank: with under 100 probes, the slowest

    for _ in range(100):
        await probe()
    quiet = p99()
    times.clear()
    flood = [asyncio.create_task(wrong(i)) for i in range(100)]
    while not all(t.done() for t in flood) or len(times) < 50:
        await probe()
    await asyncio.gather(*flood)
    assert p99() < max(0.05, 3 * quiet), \
        f"/healthz p99 {p99() * 1000:.1f} ms during the flood, {quiet * 1000:.1f} ms without ({len(times)} probes)"
    # one client: ten checked and refused, the rest told to come back later
    assert statuses.count(401) == 10 and statuses.count(429) == 90, sorted(set(statuses))
    resp = await client.get("/", headers=basic("admin"))
    assert resp.status == 429 and int(resp.headers["Retry-After"]) >= 1
    # another client (behind no proxy the address is the peer's; here: a trusted proxy's header)
    proxied = await consoles({"CRONBOX_WEB_USERS": consoles.users, "CRONBOX_WEB_TRUST_PROXY": "yes"})
    resp = await proxied.get("/", headers={**basic("admin"), "X-Forwarded-For": "192.0.2.7"})
    assert resp.status == 200


@pytest.mark.parametrize("params, message", [
    ("131072$16$1", "needs 256 MiB per login"),
    ("1048576$8$1", "needs 1024 MiB per login"),
    ("65536$1$1", "needs r >= 2"),
])
def test_scrypt_parameters_a_login_could_not_use_are_refused_at_start(params, message):
    with pytest.raises(ConfigError, match=message):
        parse_users(f"ops:scrypt${params}${'00' * 16}${'00' * 32}:cronbox_reader")


def test_the_largest_accepted_scrypt_hash_still_verifies():
    import hashlib

    salt = b"s" * 16
    digest = hashlib.scrypt(b"pw", salt=salt, n=2**17, r=8, p=1, dklen=32, maxmem=2**30)
    entry = f"scrypt${2**17}$8$1${salt.hex()}${digest.hex()}"
    (user,) = parse_users(f"ops:{entry}:cronbox_reader").values()
    assert verify_password("pw", user.hash) and not verify_password("px", user.hash)


async def test_cookies_are_secure_behind_a_trusted_tls_proxy(consoles):
    direct = await consoles({})
    resp = await direct.get("/", headers={"X-Forwarded-Proto": "https"})
    assert resp.status == 200 and "Secure" not in resp.headers["Set-Cookie"]  # nobody said to trust it
    proxied = await consoles({"CRONBOX_WEB_TRUST_PROXY": "yes", "CRONBOX_WEB_ALLOWED_HOSTS": "cron.example"})
    headers = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "cron.example"}
    resp = await proxied.get("/schedules/nightly-report", headers=headers)
    cookie = resp.headers["Set-Cookie"]
    assert resp.status == 200 and "Secure" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    token = csrf_from(await resp.text())
    headers["Cookie"] = f"cronbox_csrf={resp.cookies['cronbox_csrf'].value}"  # the client jar keeps Secure ones for https
    # the browser's Origin is the proxy's public name: accepted; the proxy's own Host does not matter
    resp = await proxied.post("/actions/pause", allow_redirects=False,
                              data={"csrf": token, "name": "nightly-report", "reason": "behind tls"},
                              headers={**headers, "Origin": "https://cron.example"})
    assert resp.status == 303, await resp.text()
    assert scalar(consoles.dsn, "SELECT paused FROM cronbox.job WHERE name = 'nightly-report'") is True
