"""Text that users or workers supplied (job names, reasons, worker errors), made safe to print
on a terminal: control characters (C0, DEL, C1, which includes the ANSI escape introducer
and CSI), Unicode format characters (bidi overrides, zero-width) and line/paragraph separators
are shown as escapes (``\\x1b``, ``\\u202e``), so nothing a worker writes can move the cursor,
recolour, retitle or rewrite an operator's screen. Newlines and tabs are escaped too: one
value, one line. Long texts are cut with a marker saying how much was left out."""

from __future__ import annotations

import re
import unicodedata

_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def _escape(c: str) -> str:
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def printable(text: object, limit: int | None = None) -> str:
    """`text` with every control escaped, cut to at most `limit` characters."""
    s = text if isinstance(text, str) else str(text)
    total = len(s)
    if limit is not None:
        s = s[:limit]  # escaping only lengthens: never look at more than is shown
    s = "".join(_escape(c) if c > "~" and unicodedata.category(c) in _UNSAFE_CATEGORIES
                or c < " " or c == "\x7f" else c for c in s)
    if limit is not None and (len(s) > limit or total > limit):
        marker = f"...[{total} chars]"
        return s[:max(0, limit - len(marker))] + marker
    return s


_NUL_ESCAPE = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")


def json_has_nul(doc: bytes) -> bool:
    """Whether JSON text holds a NUL character (`\\u0000` not itself escaped): PostgreSQL's
    jsonb refuses it (22P05), so a worker's answer holding one can only be reported as such."""
    return b"\\u0000" in doc and _NUL_ESCAPE.search(doc) is not None


def storable(text: str) -> str:
    """Text PostgreSQL can store: NUL (refused in text) becomes U+FFFD."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text
