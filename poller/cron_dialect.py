"""cronbox's cron dialect and its normal form (fire times: poller.cron).

Dialect
-------
* 5 fields ``min hour dom mon dow``; 6 fields put seconds first
  (``sec min hour dom mon dow``); 7 fields put seconds first and the year last
  (``sec min hour dom mon dow year``). Fields are separated by ASCII whitespace.
* Ranges: second 0-59, minute 0-59, hour 0-23, day-of-month 1-31, month 1-12,
  day-of-week 0-7 (0 and 7 are Sunday), year 1970-2099.
* Each field is a comma-separated list of items: ``*``, ``*/n``, ``a``, ``a-b``,
  ``a-b/n`` and ``a/n`` (from ``a`` to the field's maximum, which for day-of-week
  is 6, every ``n``). A step ``n`` is 1 up to the number of values in the field.
  ``a-a`` means just ``a``. A range must not run backwards, except that a
  day-of-week range may end on Sunday written as 0 or SUN (``FRI-SUN`` = ``5-7``).
* Names, case-insensitive: JAN..DEC in month, SUN..SAT in day-of-week.
* ``?`` alone in day-of-month or day-of-week means ``*``.
* ``L`` alone as a day-of-month item: the last day of the month (``1,15,L``).
* Day-of-week ``d#n``: the n-th (1-5) weekday d of the month (``5#3``, ``FRI#3``);
  ``dL`` or ``Ld``: the last weekday d of the month (``5L``). These items may be
  listed together but not mixed with plain days in one field.
* When both day-of-month and day-of-week are restricted, a day matches either.
* Macros, case-insensitive: ``@yearly`` = ``@annually`` (``0 0 1 1 *``),
  ``@monthly`` (``0 0 1 * *``), ``@weekly`` (``0 0 * * 0``), ``@daily`` =
  ``@midnight`` (``0 0 * * *``), ``@hourly`` (``0 * * * *``). Nothing else
  (``@reboot``, ``H``, ``W``, ``LW``, wrapping ranges such as ``22-2``) is accepted.

Normal form: always 7 fields ``sec min hour dom mon dow year`` joined by single
spaces; seconds default to ``0`` and the year to ``*``; names become numbers,
numbers lose leading zeros, ``?`` becomes ``*``, ``a-a`` becomes ``a``, a last
weekday is written ``Ld``; everything else keeps the order it was written in.
``cronbox.normalize_cron`` (sql/functions/internal/normalize_cron.sql) computes the same
string and raises the same messages; the normal form is what is stored and what
:class:`CronSchedule` reads.
"""

from __future__ import annotations

import re

__all__ = ["CronError", "normalize"]

class CronError(ValueError):
    """An invalid cron expression; the text equals the message of cronbox.normalize_cron."""


# (name, lowest, highest) in normal-form order: sec min hour dom mon dow year.
_FIELDS = (
    ("second", 0, 59),
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day-of-month", 1, 31),
    ("month", 1, 12),
    ("day-of-week", 0, 7),
    ("year", 1970, 2099),
)
_MIN, _HOUR, _DOM, _MON, _DOW = 1, 2, 3, 4, 5
_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_NAMES: dict[int, dict[str, int]] = {
    _MON: {name: i + 1 for i, name in enumerate(_MONTHS)},
    _DOW: {name: i for i, name in enumerate(_DAYS)},
}
_MACROS = {
    "@yearly": "0 0 0 1 1 * *",
    "@annually": "0 0 0 1 1 * *",
    "@monthly": "0 0 0 1 * * *",
    "@weekly": "0 0 0 * * 0 *",
    "@daily": "0 0 0 * * * *",
    "@midnight": "0 0 0 * * * *",
    "@hourly": "0 0 * * * * *",
}
# ASCII only, as in SQL: str.upper() would turn e.g. the long s into "S".
_WHITESPACE = " \t\n\r\f\v"
_SPLIT = re.compile(r"[ \t\n\r\f\v]+")
_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_ITEM = re.compile(r"(\*|[0-9]+|[A-Z]+)(?:-([0-9]+|[A-Z]+))?(?:/([0-9]+))?")
_NTH = re.compile(r"([0-9]+|[A-Z]+)#([0-9]+)")
_LAST_DOW = re.compile(r"L([0-9]+|[A-Z]+)|([0-9]+|[A-Z]+)L")


def _error(field: int, item: str, problem: str, expr: str) -> CronError:
    return CronError(f'cron: {_FIELDS[field][0]} field "{item}" {problem} in "{expr}"')


def _value(field: int, token: str, item: str, expr: str) -> int:
    _, low, high = _FIELDS[field]
    if token[0].isdigit():
        value = int(token)
    elif token in _NAMES.get(field, {}):
        value = _NAMES[field][token]
    else:
        raise _error(field, item, "is not valid", expr)
    if not low <= value <= high:
        raise _error(field, item, f"is out of range {low}-{high}", expr)
    return value


def _step(field: int, token: str, item: str, expr: str) -> int:
    _, low, high = _FIELDS[field]
    step = int(token)
    if not 1 <= step <= high - low + 1:
        raise _error(field, item, f"has a step out of range 1-{high - low + 1}", expr)
    return step


def _item(field: int, up: str, item: str, expr: str) -> str:
    """Normalize one list item; `up` is `item` with ASCII letters upper-cased."""
    if field == _DOM and up == "L":
        return "L"
    if field == _DOW:
        if m := _NTH.fullmatch(up):
            day = _value(field, m[1], item, expr)
            if not 1 <= int(m[2]) <= 5:
                raise _error(field, item, "has an occurrence out of range 1-5", expr)
            return f"{day}#{int(m[2])}"
        if m := _LAST_DOW.fullmatch(up):
            return f"L{_value(field, m[1] or m[2], item, expr)}"
    m = _ITEM.fullmatch(up)
    if m is None or (m[1] == "*" and m[2] is not None):
        raise _error(field, item, "is not valid", expr)
    if m[1] == "*":
        return "*" if m[3] is None else f"*/{_step(field, m[3], item, expr)}"
    low = _value(field, m[1], item, expr)
    high = None if m[2] is None else _value(field, m[2], item, expr)
    step = None if m[3] is None else _step(field, m[3], item, expr)
    if high is None:
        if step is None:
            return str(low)
        # croniter reads a/n as a-6/n in day-of-week, where 7 is not a start but Sunday.
        return f"{0 if field == _DOW and low == 7 else low}/{step}"
    if field == _DOW and high == 0 and low > 0:
        high = 7  # FRI-SUN
    if high < low:
        raise _error(field, item, "is a reversed range", expr)
    if high == low:
        return str(low)  # croniter would read a-a as the whole field
    return f"{low}-{high}" if step is None else f"{low}-{high}/{step}"


def _field(field: int, text: str, expr: str) -> str:
    up = text.translate(_UPPER)
    if up == "?" and field in (_DOM, _DOW):
        return "*"
    items = text.split(",")
    if "" in items:
        raise _error(field, text, "has an empty list item", expr)
    out = [_item(field, u, i, expr) for u, i in zip(up.split(","), items)]
    special = ["#" in o or o.startswith("L") for o in out]
    if field == _DOW and any(special) and not all(special):
        raise _error(field, text, "mixes # or L days with other days", expr)
    return ",".join(out)


def normalize(expr: str) -> str:
    """Validate `expr` and return its 7-field normal form, as cronbox.normalize_cron does."""
    if expr is None:
        raise CronError("cron: expression must not be NULL")
    text = expr.strip(_WHITESPACE)
    if not text:
        raise CronError("cron: expression is empty")
    if text.startswith("@"):
        macro = _MACROS.get(text.translate(_LOWER))
        if macro is None:
            raise CronError(
                f'cron: unsupported macro "{text}"; use @yearly, @annually, @monthly, '
                "@weekly, @daily, @midnight or @hourly"
            )
        return macro
    fields = _SPLIT.split(text)
    if len(fields) not in (5, 6, 7):
        raise CronError(f'cron: expected 5, 6 or 7 fields, got {len(fields)} in "{expr}"')
    if len(fields) == 5:
        fields.insert(0, "0")
    if len(fields) == 6:
        fields.append("*")
    return " ".join(_field(i, f, expr) for i, f in enumerate(fields))
