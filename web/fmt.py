"""How the console writes values: durations, times (UTC, or a job's zone), relative times,
JSON, and the URL of a schedule's page."""

from __future__ import annotations

from datetime import datetime, timedelta

import orjson

from cronbox.db import UnreadableJson


def duration(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, int | float):
        value = timedelta(seconds=float(value))
    if not isinstance(value, timedelta):
        return str(value)
    s = value.total_seconds()
    if s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 120:
        return f"{s:.1f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    if s < 172800:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} d"


def ts(value: object, zone: str | None = None) -> str:
    if not isinstance(value, datetime):
        return "" if value is None else str(value)
    if zone:
        try:
            from zoneinfo import ZoneInfo

            value = value.astimezone(ZoneInfo(zone))
            return value.strftime("%Y-%m-%d %H:%M:%S %Z")
        except (KeyError, ValueError, OSError):
            pass
    return value.strftime("%Y-%m-%d %H:%M:%S") + (" UTC" if value.utcoffset() == timedelta(0) else value.strftime(" %z"))


def ago(value: object, now: object) -> str:
    """'3 min ago' / 'in 2 h' beside a UTC time (now: the database's, of this request)."""
    if not isinstance(value, datetime) or not isinstance(now, datetime):
        return ""
    s = (now - value).total_seconds()
    if abs(s) < 1:
        return "now"
    text = duration(abs(s)).replace(".0 ", " ")
    return f"{text} ago" if s > 0 else f"in {text}"


def schedule_url(name: str) -> str:
    """A schedule's page: its name as one path segment (`/` encoded, so `a/../b` stays itself);
    names a browser would resolve as a path step (`.`, `..`) go in the query."""
    from urllib.parse import quote

    if name.strip(".") == "":
        return "/schedule?name=" + quote(name, safe="")
    return "/schedules/" + quote(name, safe="")


def json(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, UnreadableJson):  # 1e400, nesting past 1,024: shown as stored
        return str(value)
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()
