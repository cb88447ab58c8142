"""Markdown for a terminal: what ``robocache-bench`` (:mod:`robocache.bench.cli`) and ``bisect`` print.

Its own module so that a command of the harness can print without importing the CLI (``bisect`` did, and the
CLI imports ``bisect``: an import cycle).
"""
from __future__ import annotations

import re
import sys
import unicodedata

# a markdown escape (a backslash before any ASCII punctuation, as CommonMark allows), bold, a backtick
_TERMINAL = re.compile(r"\\([!-/:-@\[-`{-~])|\*\*|`")


def terminal_text(markdown: str) -> str:
    """Markdown made plain for a terminal: escapes undone (``torch\\_eager`` -> ``torch_eager``), ``**`` and
    backticks dropped, and no invisible character left (the word joiner the markdown puts after ``@`` so that a
    GitHub issue mentions nobody, a zero-width space or a bidirectional override from a record: Unicode format
    characters, category Cf), so what is copied from a terminal is what a command takes (``--providers
    torch_compile@max-autotune``). Tables keep their pipes. ``list`` always prints this; ``show``, ``report``,
    ``compare`` and ``check`` when stdout is a terminal; a pipe or file gets the markdown itself."""
    plain = _TERMINAL.sub(lambda m: m.group(1) or "", markdown)
    return "".join(ch for ch in plain if unicodedata.category(ch) != "Cf")


def for_stdout(markdown: str) -> str:
    try:
        tty = sys.stdout.isatty()
    except (AttributeError, ValueError):
        tty = False
    return terminal_text(markdown) if tty else markdown
