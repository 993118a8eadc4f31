"""Server-side charts: the runs-per-minute bars and the dependency graph, as plain data that
the templates draw as inline SVG (no chart library, nothing to download)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

CHART_W, CHART_H, CHART_LEFT = 1000, 160, 40  # drawn at the page's width; the left margin holds the y-axis


@dataclass(frozen=True)
class Bar:
    x: float
    w: float
    ok_y: float
    ok_h: float
    bad_y: float
    bad_h: float
    label: str


def runs_chart(start: datetime, hours: int, data: list[dict[str, Any]]) -> dict[str, Any]:
    minutes = hours * 60
    by_minute = {row["minute"]: row for row in data}
    peak = max([int(r["ok"]) + int(r["bad"]) for r in data] or [0]) or 1
    w = (CHART_W - CHART_LEFT) / minutes
    bars = []
    for i in range(minutes):
        t = start + timedelta(minutes=i)
        row = by_minute.get(t)
        if not row:
            continue
        ok, bad = int(row["ok"]), int(row["bad"])
        ok_h = CHART_H * ok / peak
        bad_h = CHART_H * bad / peak
        bars.append(Bar(x=CHART_LEFT + i * w, w=max(w, 1.0), ok_y=CHART_H - ok_h, ok_h=ok_h, bad_y=CHART_H - ok_h - bad_h,
                        bad_h=bad_h, label=f"{t:%H:%M} UTC: {ok} succeeded, {bad} failed"))
    ticks = [(CHART_LEFT + i * w, f"{start + timedelta(minutes=i):%H:%M}") for i in range(0, minutes, 30)]
    yticks = [(CHART_H - CHART_H * v / peak, str(v)) for v in sorted({0, peak // 2, peak})]
    return {"w": CHART_W, "h": CHART_H, "left": CHART_LEFT, "bars": bars, "peak": peak, "ticks": ticks, "yticks": yticks,
            "total_ok": sum(int(r["ok"]) for r in data), "total_bad": sum(int(r["bad"]) for r in data)}


NODE_W, NODE_H, COL_W, ROW_H = 170, 30, 220, 44


def dependency_graph(name: str, edges: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Columns by distance: upstreams of upstreams left, the job in the middle, downstreams right."""
    if not edges:
        return None
    level: dict[str, int] = {name: 0}
    state: dict[str, str | None] = {}
    for e in edges:
        state.setdefault(e["job"], e.get("job_state"))
        state.setdefault(e["upstream"], e.get("upstream_state"))
    for e in sorted(edges, key=lambda e: abs(e["level"])):
        if e["level"] < 0:
            level.setdefault(e["upstream"], e["level"])
            level.setdefault(e["job"], e["level"] + 1)
        else:
            level.setdefault(e["job"], e["level"])
            level.setdefault(e["upstream"], e["level"] - 1)
    cols = sorted(set(level.values()))
    first = cols[0]
    pos: dict[str, tuple[float, float]] = {}
    rows_per_col: dict[int, int] = {}
    for node in sorted(level, key=lambda n: (level[n], n)):
        c = level[node]
        r = rows_per_col.get(c, 0)
        rows_per_col[c] = r + 1
        pos[node] = (10 + (c - first) * COL_W, 10 + r * ROW_H)
    lines = []
    seen = set()
    for e in edges:
        key = (e["upstream"], e["job"], e["kind"])
        if key in seen or e["upstream"] not in pos or e["job"] not in pos:
            continue
        seen.add(key)
        (x1, y1), (x2, y2) = pos[e["upstream"]], pos[e["job"]]
        lines.append({"x1": x1 + NODE_W, "y1": y1 + NODE_H / 2, "x2": x2, "y2": y2 + NODE_H / 2, "kind": e["kind"]})
    nodes = [{"name": n, "x": x, "y": y, "self": n == name, "state": state.get(n)} for n, (x, y) in pos.items()]
    width = 20 + (cols[-1] - first) * COL_W + NODE_W
    height = 20 + max(rows_per_col.values()) * ROW_H
    return {"nodes": nodes, "lines": lines, "w": width, "h": height, "node_w": NODE_W, "node_h": NODE_H}
