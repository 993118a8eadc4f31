"""POST actions. Each calls one public SQL function in the request's transaction, under the
user's role: the database's grants and row-level security decide, and the change log records
the role as who did it. The CSRF check happens before (app.auth_mw). Destructive actions
(cancel a run, redrive a whole queue or everything) first answer with a confirmation page."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import orjson
from aiohttp import web
from psycopg.types.json import Jsonb

from web.app import REFUSED, BadInput, ctx, error_page, first_line, render, set_flash
from web.fmt import schedule_url

MAX_TEXT = 1000
MAX_PAYLOAD = 1024 * 1024


def _field(form: Any, name: str, *, required: bool = True, limit: int = MAX_TEXT) -> str:
    value = form.get(name, "")
    if not isinstance(value, str):
        raise ValueError(f"{name}: expected text")
    value = value.strip()
    if required and not value:
        raise ValueError(f"{name}: required")
    if len(value) > limit:
        raise ValueError(f"{name}: at most {limit} characters")
    return value


def _time(form: Any, name: str, *, required: bool = True) -> datetime | None:
    """A time from a form (datetime-local gives no offset: read as UTC, the console's zone);
    the SQL function checks its bounds."""
    text = _field(form, name, required=required, limit=40)
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{name}: expected a time like 2030-01-01T06:00 (UTC) or with an offset") from None
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


def _back(target: str, msg: str) -> web.Response:
    """Post/redirect/get: back to the page the action concerns; what happened is shown there
    once (a cookie, not the URL: a link cannot make the console say anything)."""
    resp = web.Response(status=303, headers={"Location": target})
    set_flash(resp, msg)
    return resp


def _signed(request: web.Request, reason: str) -> str:
    """The change log records the database role; with logins, the reason names the console
    user too (several users may share a role)."""
    user = ctx(request).user_name
    return f"{reason} (web: {user})" if user else reason


async def _scalar(request: web.Request, query: str, params: dict[str, Any]) -> Any:
    """One call of a public function, in a savepoint: a refusal leaves the request's
    transaction usable, so a schedule's page can be shown again with the error and input."""
    async with ctx(request).conn.transaction():
        cur = await ctx(request).conn.execute(query, params)
        row = await cur.fetchone()
    return next(iter(row.values())) if row else None


def _confirm(request: web.Request, form: Any, what: str, back: str) -> web.Response | None:
    """Destructive actions take two POSTs: the first answers with this page (works without JS)."""
    if form.get("confirm") == "yes":
        return None
    fields = {k: v for k, v in form.items() if k not in ("csrf", "confirm") and isinstance(v, str)}
    return render(request, "confirm.html", action=request.path, fields=fields, what=what, back=back)


async def act(request: web.Request) -> web.StreamResponse:
    action = request.match_info["action"]
    form = await request.post()
    name = form.get("name") if action in SCHEDULE_ACTIONS else None
    try:
        return await _act(request, action, form)
    except (ValueError, *REFUSED) as exc:  # BadInput is a ValueError
        message = str(exc) if isinstance(exc, ValueError) else first_line(exc)
        if isinstance(name, str) and name.strip() and len(name) <= 200:
            from web.pages import schedule

            # the schedule's page again, with the error and what was typed
            typed = {k: v for k, v in form.items() if isinstance(v, str) and k != "csrf"}
            page = await schedule(request, name=name.strip(), status=400, error=f"{action}: {message}",
                                  form={"action": action, **typed})
            if page.status == 400:
                return page
        return error_page(request, 400, "Refused" if not isinstance(exc, ValueError) else "Bad input", message)


SCHEDULE_ACTIONS = ("pause", "resume", "trigger", "backfill")


async def _act(request: web.Request, action: str, form: Any) -> web.StreamResponse:
    if action in SCHEDULE_ACTIONS:
        name = _field(form, "name", limit=200)
        back = schedule_url(name)
        if action == "pause":
            reason = _signed(request, _field(form, "reason"))
            until = _time(form, "until", required=False)
            ok = await _scalar(request, "SELECT cronbox.pause(name => %(n)s, reason => %(r)s, until => %(u)s)",
                               {"n": name, "r": reason, "u": until})
            done = "paused" + (f" until {until.isoformat(sep=' ')}" if until else "")
            return _back(back, done if ok is not False else "already paused")
        if action == "resume":
            reason = _signed(request, _field(form, "reason", required=False) or "resumed from the web console")
            ok = await _scalar(request, "SELECT cronbox.resume(name => %(n)s, reason => %(r)s)",
                               {"n": name, "r": reason})
            return _back(back, "resumed" if ok is not False else "was not paused")
        if action == "backfill":
            start, end = _time(form, "from"), _time(form, "to")
            overlap = _field(form, "overlap", required=False, limit=20) or "buffer_all"
            request_id = await _scalar(
                request, 'SELECT cronbox.backfill(name => %(n)s, "from" => %(f)s, "to" => %(t)s, overlap => %(o)s)',
                {"n": name, "f": start, "t": end, "o": overlap})
            return _back(back, f"backfill {request_id} requested: the poller fires the range shortly")
        raw = _field(form, "payload", required=False, limit=MAX_PAYLOAD)
        payload = None
        if raw:
            try:
                payload = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise ValueError(f"payload: not valid JSON ({exc})") from None
        run = await _scalar(request, "SELECT cronbox.trigger(name => %(n)s, payload => %(p)s)",
                            {"n": name, "p": Jsonb(payload) if payload is not None else None})
        return _back(back, "triggered: a run is due now")
    if action == "cancel":
        run_id = str(_run_id(form))
        if (page := _confirm(request, form, f"Cancel run {run_id}?", f"/runs/{run_id}")) is not None:
            return page
        outcome = await _scalar(request, "SELECT cronbox.cancel(run_id => %(id)s)", {"id": int(run_id)})
        return _back(f"/runs/{run_id}", f"cancel: {outcome}")
    if action == "redrive":
        ident = _field(form, "id", required=False, limit=19)
        queue = _field(form, "queue", required=False, limit=200)
        everything = form.get("everything") == "yes"
        if ident:
            if not ident.isdigit():
                raise ValueError("id: expected a positive integer")
            n = await _scalar(request, "SELECT cronbox.redrive(id => %(id)s)", {"id": int(ident)})
        elif queue:
            if (page := _confirm(request, form, f"Redrive every dead letter of queue {queue!r}?", "/dead-letters")) is not None:
                return page
            n = await _scalar(request, "SELECT cronbox.redrive(queue => %(q)s)", {"q": queue})
        elif everything:
            if (page := _confirm(request, form, "Redrive ALL dead letters?", "/dead-letters")) is not None:
                return page
            n = await _scalar(request, "SELECT cronbox.redrive(everything => true)", {})
        else:
            raise ValueError("redrive: say which dead letters (id, queue or everything)")
        return _back("/dead-letters", f"redriven: {n}")
    if action == "rerun":
        run_id = _run_id(form)
        new = await _scalar(request, "SELECT cronbox.rerun(run_id => %(id)s, reason => %(r)s)",
                            {"id": run_id, "r": _signed(request, "rerun from the web console")})
        if new is None:
            return _back(f"/runs/{run_id}", "re-run requested: held (queue limit or dependency gate)")
        return _back(f"/runs/{new}", f"re-run of run {run_id}")
    if action == "delete-dead-letter":
        ident = _field(form, "id", limit=19)
        if not ident.isdigit():
            raise BadInput("id: expected a positive integer")
        if (page := _confirm(request, form, f"Delete dead letter {ident} for good?", "/dead-letters")) is not None:
            return page
        await _scalar(request, "SELECT cronbox.delete_dead_letter(id => %(id)s)", {"id": int(ident)})
        return _back("/dead-letters", f"dead letter {ident} deleted")
    return error_page(request, 404, "No such action", f"Unknown action {action!r}.")


def _run_id(form: Any) -> int:
    run_id = _field(form, "run_id", limit=19)
    if not run_id.isdigit() or int(run_id) >= 2**63:
        raise BadInput("run_id: expected a positive integer")
    return int(run_id)


def add_routes(app: web.Application) -> None:
    app.router.add_post("/actions/{action}", act)
