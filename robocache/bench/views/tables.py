"""Markdown text of the views: escaping (records are data, never markup), number formats, tables, sections.

A view's sections render on demand (:data:`Section`); :func:`sections_json` renders the same sections to the
tables they are built from (``--format json``: one computation, two renderings).
"""
from __future__ import annotations

import contextlib
import contextvars
import re
from typing import Any


def esc(x: Any) -> str:
    """Markdown-table-safe text (records are data, never markup)."""
    s = str(x)
    for ch in ("\\", "|", "<", ">", "`", "*", "_", "[", "]"):
        s = s.replace(ch, "\\" + ch)
    return s.replace("\n", " ")


def code(x: Any) -> str:
    """Text for inside a code span (between backticks): markdown shows it literally, so nothing is escaped there (a
    backslash would show as one); a backtick, which would end the span, becomes ``'`` and a newline a space."""
    return str(x).replace("`", "'").replace("\r", " ").replace("\n", " ")


def fmt_us(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.1f}" if x < 1e4 else f"{x:,.0f}"


def fmt_sig(x: float | None, digits: int = 3) -> str:
    """``x`` with ``digits`` significant digits, never in exponent form and never rounded to nothing (0.2 GB/s
    printed as ``0``, an integer format, read as no bandwidth at all): 0.213 -> ``0.213``, 8.0 -> ``8.00``,
    616.1 -> ``616``; thousands and up in full with separators (``2,412``)."""
    import math

    if x is None:
        return "-"
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    if abs(x) >= 10 ** (digits - 1):
        return f"{x:,.0f}"
    decimals = digits - 1 - math.floor(math.log10(abs(x)))
    return f"{x:,.{decimals}f}"


def fmt_num(x: float | None, unit: str = "") -> str:
    if x is None:
        return "-"
    for div, suf in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g}{suf}{unit}"
    return f"{x:.3g}{unit}"


# The tables of the text being rendered, unescaped, while :func:`capture_tables` is active: the JSON output of
# ``report`` is the same tables the markdown is built from (one computation, two renderings).
_CAPTURE: contextvars.ContextVar[list[dict[str, Any]] | None] = contextvars.ContextVar("robocache_tables",
                                                                                       default=None)


@contextlib.contextmanager
def capture_tables():
    """Collect every :func:`table` rendered inside the block as ``{"columns": [...], "rows": [[...]]}`` (the cells
    as displayed, as plain strings: no markdown escapes)."""
    got: list[dict[str, Any]] = []
    token = _CAPTURE.set(got)
    try:
        yield got
    finally:
        _CAPTURE.reset(token)


def table(header: list[str], rows: list[list[Any]]) -> str:
    got = _CAPTURE.get()
    if got is not None:
        got.append({"columns": [str(h) for h in header],
                    "rows": [[str(c).replace("\n", " ") for c in row] for row in rows]})
    out = ["| " + " | ".join(esc(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def fmt_x(v: float | None) -> str:
    """A ratio to about four significant digits: 1.72x, 19.81x, 455x (not 455.00x)."""
    return "-" if v is None else f"{v:.0f}x" if abs(v) >= 100 else f"{v:.2f}x"


Section = tuple[str, str, Any]  # (markdown heading, title, a function that renders the section's body)


def render(title: str, head: str | None, sections: list[Section]) -> str:
    """The markdown of a report: its title, the header (when given), then each section's heading and body."""
    parts = [f"# {title}", *([head] if head is not None else [])]
    for level, name, body in sections:
        parts += ([f"{level} {name}"] if name else []) + [body()]
    return "\n\n".join(parts) + "\n"


def sections_json(sections: list[Section]) -> list[dict[str, Any]]:
    """Each section's title and the tables its body is built from (cells as displayed, no markdown escapes); a
    section without a table (a note such as "not in this run", the health list) carries its text as ``note``,
    markdown undone."""
    out = []
    for _level, name, body in sections:
        with capture_tables() as tables:
            text = body()
        out.append({"title": name, "tables": tables,
                    "note": None if tables else _UNMARK.sub(lambda m: m.group(1) or "", text).strip()})
    return out


# markdown escapes undone, emphasis and backticks dropped (the note of a section without a table)
_UNMARK = re.compile(r"\\([\\|<>`*_\[\]])|\*\*|`|(?<![\w\\])_|_(?!\w)")
