"""The aiohttp application: authentication, CSRF, one database transaction per request under
the user's role, security headers, and template rendering (jinja2, autoescaped)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import psycopg
from aiohttp import web
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from cronbox import __version__
from web import fmt, guard, queries
from web.auth import Authenticator
from web.settings import WebSettings

log = logging.getLogger("cronbox.web")
HERE = Path(__file__).parent
CSRF_COOKIE = "cronbox_csrf"
FLASH_COOKIE = "cronbox_flash"  # what an action did, shown once by the page it redirects to
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

SETTINGS = web.AppKey("settings", WebSettings)
POOL = web.AppKey("pool", AsyncConnectionPool)
AUTH = web.AppKey("auth", Authenticator)
GATE = web.AppKey("gate", guard.LoginGate)
HOSTS = web.AppKey("hosts", object)
SECRET = web.AppKey("secret", bytes)
TEMPLATES = web.AppKey("templates", jinja2.Environment)


@dataclass
class Ctx:
    """What the middlewares learn about a request: who, as which role, its CSRF cookie, its
    transaction and what the role may do."""

    role: str | None = None
    user_name: str = ""
    csrf_cookie: str = ""
    set_cookie: bool = False
    conn: Any = None
    can: dict[str, Any] = field(default_factory=dict)
    flash: str | None = None


CTX = web.RequestKey("ctx", Ctx)


def ctx(request: web.Request) -> Ctx:
    if CTX not in request:
        request[CTX] = Ctx()
    return request[CTX]

HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
                               "frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


class BadInput(ValueError):
    """A bad filter or form value: a 400 page with the site's navigation, naming the field."""


def make_templates() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters.update(duration=fmt.duration, ts=fmt.ts, json=fmt.json, ago=fmt.ago, schedule_url=fmt.schedule_url)
    env.globals["version"] = __version__
    return env


def csrf_token(request: web.Request) -> str:
    """The form token: HMAC of the browser's CSRF cookie and the user (double submit, bound)."""
    user = ctx(request).user_name
    cookie = ctx(request).csrf_cookie
    return hmac.new(request.app[SECRET], f"{cookie}:{user}".encode(), hashlib.sha256).hexdigest()


def render(request: web.Request, template: str, status: int = 200, **values: Any) -> web.Response:
    env = request.app[TEMPLATES]
    values.setdefault("live", False)
    html = env.get_template(template).render(
        request=request, user=ctx(request).user_name, can=ctx(request).can,
        csrf=csrf_token(request), msg=ctx(request).flash, now=ctx(request).can.get("now"),
        refresh=request.app[SETTINGS].refresh, **values)
    return web.Response(text=html, status=status, content_type="text/html")


def error_page(request: web.Request, status: int, title: str, detail: str) -> web.Response:
    return render(request, "error.html", status=status, title=title, detail=detail)


@web.middleware
async def headers_mw(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        resp = await handler(request)
    except web.HTTPException as exc:
        resp = exc
    for k, v in HEADERS.items():
        resp.headers.setdefault(k, v)
    secure = guard.scheme(request, request.app[SETTINGS]) == "https"
    if ctx(request).set_cookie:
        resp.set_cookie(CSRF_COOKIE, ctx(request).csrf_cookie, httponly=True, samesite="Strict", path="/",
                        secure=secure)
    if ctx(request).flash is not None and FLASH_COOKIE not in resp.cookies:
        resp.del_cookie(FLASH_COOKIE, path="/")  # shown once
    elif FLASH_COOKIE in resp.cookies:
        resp.cookies[FLASH_COOKIE]["secure"] = secure
    if isinstance(resp, web.HTTPException):
        raise resp
    return resp


@web.middleware
async def auth_mw(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.path in ("/healthz",) or request.path.startswith("/static/"):
        return await handler(request)
    settings = request.app[SETTINGS]
    # Before anything else (no cookie, no token, no database): a page of another site that
    # rebinds its name to this address must get nothing back and change nothing.
    problem = guard.host_problem(request, settings, request.app[HOSTS])  # type: ignore[arg-type]
    if problem:
        log.warning("request refused: %s (%s %s)", problem, request.method, request.path)
        return web.Response(status=403, text=f"cronbox console: {problem} (CRONBOX_WEB_ALLOWED_HOSTS)\n")
    c = ctx(request)
    if settings.auth:
        user = await request.app[GATE].check(request.headers.get("Authorization"), guard.client(request, settings))
        if isinstance(user, float):
            return web.Response(status=429, text="cronbox console: too many login attempts; try again later\n",
                                headers={"Retry-After": str(int(user) + 1)})
        if user is None:
            return web.Response(status=401, text="cronbox console: log in",
                                headers={"WWW-Authenticate": 'Basic realm="cronbox", charset="UTF-8"'})
        c.role = user.role
        c.user_name = user.name
    cookie = request.cookies.get(CSRF_COOKIE, "")
    if len(cookie) < 32:
        cookie = secrets.token_urlsafe(32)
        c.set_cookie = True
    c.csrf_cookie = cookie
    c.flash = read_flash(request)
    if request.method == "POST":
        problem = await _csrf_problem(request)
        if problem:
            log.warning("csrf check failed: %s (%s %s)", problem, request.method, request.path)
            return error_page(request, 403, "Request refused", f"Cross-site request check failed: {problem}. "
                              "Reload the page and submit the form again.")
    return await handler(request)


def set_flash(resp: web.StreamResponse, msg: str) -> None:
    raw = base64.urlsafe_b64encode(msg[:500].encode()).decode()
    resp.set_cookie(FLASH_COOKIE, raw, httponly=True, samesite="Strict", path="/", max_age=120)


def read_flash(request: web.Request) -> str | None:
    raw = request.cookies.get(FLASH_COOKIE)
    if not raw:
        return None
    try:
        return base64.urlsafe_b64decode(raw.encode()).decode()[:500]
    except (ValueError, UnicodeDecodeError):
        return ""


async def _csrf_problem(request: web.Request) -> str | None:
    if ctx(request).set_cookie:
        return "no CSRF cookie"
    form = await request.post()
    token = form.get("csrf")
    if not isinstance(token, str) or not hmac.compare_digest(token, csrf_token(request)):
        return "missing or wrong CSRF token"
    return None


@web.middleware
async def db_mw(request: web.Request, handler: Handler) -> web.StreamResponse:
    """One transaction per request, under the user's database role; GETs are read-only."""
    if request.path in ("/healthz",) or request.path.startswith("/static/"):
        return await handler(request)
    async with request.app[POOL].connection() as conn:
        conn.row_factory = dict_row  # type: ignore[assignment]
        try:
            async with conn.transaction():
                if request.method != "POST":
                    await conn.execute("SET TRANSACTION READ ONLY")
                await conn.execute("SET LOCAL statement_timeout = '15s'")
                # Row-level security inflates the planner's cost estimates (a sub-plan per row
                # that an InitPlan short-circuits), so JIT compiled page queries that read a
                # page of rows: 0.2-1.8 s of compiling per query at 100,000 schedules. The
                # console's queries are all short; JIT never pays for them (docs/web.md#scale).
                await conn.execute("SET LOCAL jit = off")
                c = ctx(request)
                if c.role:
                    await conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(c.role)))
                c.conn = conn
                c.can = await queries.abilities(conn)
                resp = await handler(request)
                if resp.status >= 400:  # an action that failed writes nothing
                    raise _Rollback(resp)
                return resp
        except _Rollback as rb:
            return rb.response
        except BadInput as exc:
            return error_page(request, 400, "Bad value", str(exc))
        except psycopg.errors.InsufficientPrivilege as exc:
            return error_page(request, 403, "Not allowed", f"The database refused: {first_line(exc)}")
        except psycopg.errors.QueryCanceled:
            return error_page(request, 503, "Too slow", "The query took longer than 15 s; narrow the filters.")
        except REFUSED as exc:
            return error_page(request, 400, "Refused", first_line(exc))
        except psycopg.errors.InvalidTextRepresentation as exc:
            return error_page(request, 400, "Bad value", first_line(exc))
        except psycopg.Error as exc:
            log.exception("database error on %s %s", request.method, request.path)
            return error_page(request, 500, "Database error", first_line(exc))


# What the SQL functions raise for a refused call (bad value, unknown name, wrong state).
REFUSED = (psycopg.errors.RaiseException, psycopg.errors.NoDataFound, psycopg.errors.InvalidParameterValue,
           psycopg.DataError, psycopg.errors.ObjectNotInPrerequisiteState, psycopg.errors.CheckViolation)


class _Rollback(Exception):
    def __init__(self, response: web.StreamResponse):
        self.response = response


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else exc.__class__.__name__


async def _close_gate(app: web.Application) -> None:
    app[GATE].pool.shutdown(wait=False, cancel_futures=True)


def build(settings: WebSettings, pool: AsyncConnectionPool) -> web.Application:
    from web import actions, pages

    app = web.Application(middlewares=[headers_mw, auth_mw, db_mw], client_max_size=2 * 1024 * 1024)
    app[SETTINGS] = settings
    app[POOL] = pool
    app[AUTH] = Authenticator(settings.users)
    # scrypt holds a core for ~50-100 ms: a few at a time, so pages and /healthz keep answering
    app[GATE] = guard.LoginGate(app[AUTH], concurrency=max(1, (os.cpu_count() or 2) // 2), backlog=32,
                                per_minute=settings.login_failures)
    app[HOSTS] = guard.allowed_hosts(settings)
    app.on_cleanup.append(_close_gate)
    app[SECRET] = settings.secret or secrets.token_bytes(32)
    app[TEMPLATES] = make_templates()
    pages.add_routes(app)
    actions.add_routes(app)
    app.router.add_static("/static/", HERE / "static", name="static", append_version=True)
    return app
