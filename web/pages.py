"""GET pages. Each reads through cronbox's views in the request's transaction (app.db_mw)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from aiohttp import web

from web import history as h
from web import queries as q
from web.app import BadInput, ctx, error_page, render
from web.svg import dependency_graph, runs_chart

CHART_HOURS = 3
NEXT_FIRES = 10
SCHEDULE_STRIP = 50
STATUSES = ("active", "paused", "quarantined", "waiting", "finished")


def _conn(request: web.Request):  # noqa: ANN202
    return ctx(request).conn


def _int(request: web.Request, name: str) -> int | None:
    raw = request.query.get(name, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or len(raw) > 19 or int(raw) >= 2**63:
        raise BadInput(f"{name}: expected a positive integer")
    return int(raw)


def parse_time(name: str, raw: str) -> datetime | None:
    """A time typed as ISO 8601 (`2026-01-31 13:45`, seconds optional); UTC unless it says."""
    raw = raw.strip()
    if not raw:
        return None
    try:
        value = datetime.fromisoformat(raw)
    except ValueError:
        raise BadInput(f"{name}: expected a time like 2026-01-31 13:45 (UTC), got {raw[:40]!r}") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    if not 1971 <= value.year <= 9999:
        raise BadInput(f"{name}: year must be between 1971 and 9999")
    return value


def _text(request: web.Request, name: str, limit: int = 200) -> str:
    raw = request.query.get(name, "").strip()
    if len(raw) > limit:
        raise BadInput(f"{name}: at most {limit} characters")
    return raw


async def overview(request: web.Request) -> web.Response:
    """Queues and processes for the roles that may read those views (a cronbox_user may not:
    they span every owner); failures, held schedules and the chart for everyone, row security
    deciding whose."""
    conn = _conn(request)
    can = ctx(request).can
    start, data = await q.runs_per_minute(conn, CHART_HOURS)
    live = [p for p in await q.processes(conn) if p["live"]] if can["see_processes"] else None
    hour_ago = (can["now"] - timedelta(hours=1)).astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    return render(request, "overview.html", live=True,
                  queues=await q.queues(conn) if can["see_queues"] else None, processes=live,
                  pools=await q.pools(conn) if can["see_pools"] else None,
                  breakers=q.breakers(live) if live is not None else None, held=await q.held_counts(conn),
                  failures=await q.failures_last_hour(conn), hour_ago=hour_ago,
                  chart=runs_chart(start, CHART_HOURS, data), hours=CHART_HOURS)


async def schedules(request: web.Request) -> web.Response:
    search = _text(request, "q")
    after = _text(request, "after") or None
    status = _text(request, "status")
    if status and status not in STATUSES:
        raise BadInput(f"status: one of {', '.join(STATUSES)}")
    conn = _conn(request)
    found = await q.schedules(conn, search, after, status or None)
    more = len(found) > q.PAGE
    found = found[: q.PAGE]
    strips = {s["job_id"]: h.strip_cells(s["strip"]) for s in found}
    return render(request, "schedules.html", rows=found, search=search, after=after, status_filter=status,
                  statuses=STATUSES, strips=strips, next_after=found[-1]["name"] if more else None)


async def schedule(request: web.Request, *, name: str | None = None, status: int = 200,
                   error: str | None = None, form: dict[str, str] | None = None) -> web.Response:
    """A schedule's page; also re-shown by a refused action, with its error and the input."""
    name = name if name is not None else request.match_info.get("name") or request.query.get("name", "")
    conn = _conn(request)
    s = await q.schedule(conn, name)
    if s is None:
        return error_page(request, 404, "No such schedule", f"There is no schedule named {name!r} that you may see.")
    # cronbox.next_fires for the roles that may call it (admin, user); readers see the stored ones
    computed = bool(ctx(request).can["next_fires"])
    fires = (await q.next_fires(conn, name, s["job_id"], NEXT_FIRES) if computed
             else await q.upcoming(conn, s["job_id"], NEXT_FIRES))
    strip = (await h.strips(conn, [s["job_id"]], SCHEDULE_STRIP)).get(s["job_id"], [])
    waiting, n_waiting = await h.waiting(conn, job_ids=[s["job_id"]])
    return render(request, "schedule.html", status=status, error=error, form=form or {}, s=s,
                  d=await q.definition(conn, name), fires=fires, computed=computed, n_fires=NEXT_FIRES,
                  runs=await q.recent_runs(conn, s["job_id"]), changes=await q.changes(conn, s["job_id"]),
                  backfills=await q.backfills(conn, s["job_id"]), latest=strip, waiting=waiting, n_waiting=n_waiting,
                  graph=dependency_graph(name, await q.edges(conn, name)))


def _sorting(request: web.Request, order: str) -> h.Sorting:
    sorting = h.Sorting(order=order, top=_int(request, "top"))
    cursor = _text(request, "cursor", 80)
    if cursor:
        key, _, run_id = cursor.rpartition("|")
        if not run_id.isdigit() or len(run_id) > 19:
            raise BadInput("cursor: expected value|run_id")
        try:
            sorting.after_key = parse_time("cursor", key) if order == "fire" else float(key)
        except ValueError:
            raise BadInput("cursor: expected value|run_id") from None
        sorting.after_id = int(run_id)
    return sorting


async def runs(request: web.Request) -> web.Response:
    conn = _conn(request)
    f = {"job": _text(request, "job"), "queue": _text(request, "queue"),
         "since": _text(request, "since", 40), "until": _text(request, "until", 40)}
    asked = {x.strip() for x in request.query.getall("state", []) if x.strip()}
    bad = sorted(asked - set(q.STATES))
    if bad:
        raise BadInput(f"state: {bad[0][:40]!r} is not one of {', '.join(q.STATES)}")
    states = [x for x in q.STATES if x in asked]
    order = _text(request, "order") or "created"
    if order not in h.ORDERS:
        raise BadInput(f"order: one of {', '.join(h.ORDERS)}")
    ids = await h.job_ids(conn, f["job"]) if f["job"] else None
    owned = None if ids is not None or ctx(request).can["reads_all"] else await h.owned_job_ids(conn)
    filters = h.Filters(job_ids=ids, queue=f["queue"] or None, states=states,
                        since=parse_time("since", f["since"]), until=parse_time("until", f["until"]),
                        before=_int(request, "before"))
    sorting = _sorting(request, order)
    found = await h.runs(conn, filters, owned=owned, sorting=sorting)
    more = len(found) > q.PAGE
    found = found[: q.PAGE]
    base: list[tuple[str, str]] = [(k, v) for k, v in f.items() if v] + [("state", x) for x in states]
    if order != "created":
        base.append(("order", order))
    next_query = None
    if more and order == "created":
        next_query = [*base, ("before", str(found[-1]["run_id"]))]
    elif more:
        top = sorting.top if sorting.top is not None else found[0]["window_top"]
        next_query = [*base, ("top", str(top)), ("cursor", f"{h.cursor_of(found[-1], order)}|{found[-1]['run_id']}")]
    paged = bool(request.query.get("before") or request.query.get("cursor"))
    waiting, n_waiting = ([], 0)
    if not paged and not states and not f["since"] and not f["until"]:
        waiting, n_waiting = await h.waiting(conn, job_ids=ids, queue=f["queue"] or None)  # row security: an owner's own
    return render(request, "runs.html", live=not paged, rows=found, f=f, chosen=states, order=order,
                  waiting=waiting, n_waiting=n_waiting,
                  orders=h.ORDERS, states=q.STATES, next_query=next_query, first_query=base if paged else None,
                  window=h.SORT_WINDOW)


async def run(request: web.Request) -> web.Response:
    run_id = request.match_info["run_id"]
    if not run_id.isdigit() or len(run_id) > 19 or int(run_id) >= 2**63:
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
    found = await q.processes(_conn(request))
    return render(request, "processes.html", live=True, rows=found,
                  breakers=q.breakers([p for p in found if p["live"]]))


async def pools(request: web.Request) -> web.Response:
    if not ctx(request).can["see_pools"]:
        return error_page(request, 403, "Not allowed", "Your database role may not read cronbox.pools.")
    conn = _conn(request)
    return render(request, "pools.html", live=True, pools=await q.pools(conn), users=await q.pool_users(conn))


async def healthz(request: web.Request) -> web.Response:
    from web.app import POOL

    async with request.app[POOL].connection() as conn:
        await conn.execute("SELECT 1")
    return web.Response(text="ok\n")


async def schedule_by_query(request: web.Request) -> web.Response:
    """/schedule?name=...: for names a browser would rewrite in a path (`.`, `..`)."""
    return await schedule(request, name=_text(request, "name"))


def add_routes(app: web.Application) -> None:
    app.router.add_get("/", overview)
    app.router.add_get("/schedules", schedules)
    app.router.add_get("/schedules/{name:.+}", schedule)
    app.router.add_get("/schedule", schedule_by_query)
    app.router.add_get("/runs", runs)
    app.router.add_get("/runs/{run_id}", run)
    app.router.add_get("/dead-letters", dead_letters)
    app.router.add_get("/processes", processes)
    app.router.add_get("/pools", pools)
    app.router.add_get("/healthz", healthz)

