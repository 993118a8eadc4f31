"""GET pages. Each reads through cronbox's views in the request's transaction (app.db_mw)."""

from __future__ import annotations

from datetime import datetime, timezone

from aiohttp import web

from web import queries as q
from web.app import ctx, error_page, render
from web.svg import dependency_graph, runs_chart

CHART_HOURS = 3
NEXT_FIRES = 10


def _conn(request: web.Request):  # noqa: ANN202
    return ctx(request).conn


def _int(request: web.Request, name: str) -> int | None:
    raw = request.query.get(name, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or len(raw) > 19:
        raise web.HTTPBadRequest(text=f"{name}: expected a positive integer")
    return int(raw)


def _time(request: web.Request, name: str) -> datetime | None:
    """A time filter from a datetime-local input; read as UTC when it has no offset."""
    raw = request.query.get(name, "").strip()
    if not raw:
        return None
    try:
        value = datetime.fromisoformat(raw)
    except ValueError:
        raise web.HTTPBadRequest(text=f"{name}: expected a time like 2026-01-31T13:45 (UTC), got {raw[:40]!r}") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    if not 1971 <= value.year <= 9999:
        raise web.HTTPBadRequest(text=f"{name}: year must be between 1971 and 9999")
    return value


def _text(request: web.Request, name: str, limit: int = 200) -> str:
    raw = request.query.get(name, "").strip()
    if len(raw) > limit:
        raise web.HTTPBadRequest(text=f"{name}: at most {limit} characters")
    return raw


async def overview(request: web.Request) -> web.Response:
    """Queues and processes for the roles that may read those views (a cronbox_user may not:
    they span every owner); failures and the chart for everyone, row security deciding whose."""
    conn = _conn(request)
    can = ctx(request).can
    start, data = await q.runs_per_minute(conn, CHART_HOURS)
    return render(request, "overview.html", live=True,
                  queues=await q.queues(conn) if can["see_queues"] else None,
                  processes=[p for p in await q.processes(conn) if p["live"]] if can["see_processes"] else None,
                  failures=await q.failures_last_hour(conn), chart=runs_chart(start, CHART_HOURS, data),
                  hours=CHART_HOURS)


async def schedules(request: web.Request) -> web.Response:
    search = _text(request, "q")
    after = _text(request, "after") or None
    found = await q.schedules(_conn(request), search, after)
    more = len(found) > q.PAGE
    found = found[: q.PAGE]
    return render(request, "schedules.html", rows=found, search=search, after=after,
                  next_after=found[-1]["name"] if more else None)


async def schedule(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    conn = _conn(request)
    s = await q.schedule(conn, name)
    if s is None:
        return error_page(request, 404, "No such schedule", f"There is no schedule named {name!r} that you may see.")
    edges = await q.edges(conn, name, bool(ctx(request).can["see_gates"]))
    # cronbox.next_fires for the roles that may call it (admin, user); readers see the stored ones
    computed = bool(ctx(request).can["next_fires"])
    fires = (await q.next_fires(conn, name, s["job_id"], NEXT_FIRES) if computed
             else await q.upcoming(conn, s["job_id"], NEXT_FIRES))
    return render(request, "schedule.html", s=s, d=await q.definition(conn, name),
                  fires=fires, computed=computed, n_fires=NEXT_FIRES,
                  runs=await q.recent_runs(conn, s["job_id"]), changes=await q.changes(conn, s["job_id"]),
                  backfills=await q.backfills(conn, s["job_id"]),
                  graph=dependency_graph(name, edges))


async def runs(request: web.Request) -> web.Response:
    conn = _conn(request)
    f = {"job": _text(request, "job"), "queue": _text(request, "queue"), "state": _text(request, "state"),
         "since": request.query.get("since", "").strip()[:40], "until": request.query.get("until", "").strip()[:40]}
    if f["state"] and f["state"] not in q.STATES:
        raise web.HTTPBadRequest(text=f"state: one of {', '.join(q.STATES)}")
    ids = await q.job_ids(conn, f["job"]) if f["job"] else None
    owned = None if ids is not None or ctx(request).can["reads_all"] else await q.owned_job_ids(conn)
    found = await q.runs(conn, job_ids=ids, queue=f["queue"] or None, state=f["state"] or None,
                         since=_time(request, "since"), until=_time(request, "until"), before=_int(request, "before"),
                         owned=owned)
    more = len(found) > q.PAGE
    found = found[: q.PAGE]
    next_query = None
    if more:
        next_query = {**{k: v for k, v in f.items() if v}, "before": str(found[-1]["run_id"])}
    return render(request, "runs.html", live=not request.query.get("before"), rows=found, f=f,
                  states=q.STATES, next_query=next_query)


async def run(request: web.Request) -> web.Response:
    run_id = request.match_info["run_id"]
    if not run_id.isdigit() or len(run_id) > 19:
        return error_page(request, 404, "No such run", "Run ids are positive integers.")
    conn = _conn(request)
    r = await q.run(conn, int(run_id))
    if r is None:
        return error_page(request, 404, "No such run", f"There is no run {run_id} that you may see.")
    return render(request, "run.html", live=r["state"] in ("dispatched", "delivered", "running"), r=r,
                  attempts=await q.attempts(conn, r))


async def dead_letters(request: web.Request) -> web.Response:
    if not ctx(request).can["see_dead_letters"]:
        return error_page(request, 403, "Not allowed", "Your database role may not read cronbox.dead_letters.")
    conn = _conn(request)
    queue = _text(request, "queue") or None
    found = await q.dead_letters(conn, queue, _int(request, "before"))
    more = len(found) > q.PAGE
    found = found[: q.PAGE]
    return render(request, "dead_letters.html", live=True, rows=found, queue=queue,
                  queues=await q.dead_letter_queues(conn),
                  next_before=found[-1]["dead_letter_id"] if more else None)


async def processes(request: web.Request) -> web.Response:
    if not ctx(request).can["see_processes"]:
        return error_page(request, 403, "Not allowed", "Your database role may not read cronbox.processes.")
    return render(request, "processes.html", live=True, rows=await q.processes(_conn(request)))


async def healthz(request: web.Request) -> web.Response:
    from web.app import POOL

    async with request.app[POOL].connection() as conn:
        await conn.execute("SELECT 1")
    return web.Response(text="ok\n")


def add_routes(app: web.Application) -> None:
    app.router.add_get("/", overview)
    app.router.add_get("/schedules", schedules)
    app.router.add_get("/schedules/{name:.+}", schedule)
    app.router.add_get("/runs", runs)
    app.router.add_get("/runs/{run_id}", run)
    app.router.add_get("/dead-letters", dead_letters)
    app.router.add_get("/processes", processes)
    app.router.add_get("/healthz", healthz)
