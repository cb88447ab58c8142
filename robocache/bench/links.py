"""Links into the dashboard: the URL of a series' History view and of a run's Runs page.

One place builds them, for the alerts (``check``'s markdown and JSON, and so the GitHub issues made from
them) and for the dashboard's own pages. A view's selections are query parameters (the dashboard binds its
widgets to them: ``dashboard/data.py`` ``bound``/``bound_multi``), so a link restores the view it names.

The base URL: ``check --dashboard-url URL``, else ``$ROBOCACHE_DASHBOARD_URL``, else
http://127.0.0.1:8501 (``make run``'s dashboard). ``base=""`` gives a link relative to the dashboard's own
pages (``history?machine=...``), for the pages themselves. Standard library only.
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from .schema import fingerprint

ENV_VAR = "ROBOCACHE_DASHBOARD_URL"
DEFAULT = "http://127.0.0.1:8501"
HISTORY_PAGE = "history"  # the pages' url paths (dashboard/app.py: the file name unless url_path says otherwise)
RUNS_PAGE = "runs"
# History's metric of a call-cost series judged by its interleaved ratio: the series' measure (regressions.noise.
# CALL_RATIO; this module stays standard-library only, tests/test_dashboard_history.py holds the two equal)
RATIO_METRIC = "call_ratio"
# http(s), a host, then no whitespace, quotes, angle brackets, parentheses or backslashes: a link that can sit in
# markdown ``[text](url)`` and an issue body without being cut or becoming markup
_URL_RE = re.compile(r"^https?://[^\s\"'<>()\\`]+$")


def base_url(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The dashboard's base URL (no trailing slash): ``explicit``, else ``$ROBOCACHE_DASHBOARD_URL``, else
    :data:`DEFAULT`. Raises ValueError naming where a bad one came from (not http(s), spaces, brackets)."""
    environ = os.environ if environ is None else environ
    if explicit is not None:
        url, where = explicit, "--dashboard-url"
    elif environ.get(ENV_VAR, "").strip():
        url, where = environ[ENV_VAR].strip(), ENV_VAR
    else:
        return DEFAULT
    if not _URL_RE.match(url):
        raise ValueError(f"{where} must be an http:// or https:// URL without spaces, quotes or brackets "
                         f"(e.g. {DEFAULT}), got {url!r}")
    return url.rstrip("/")


def page_url(page: str, params: Mapping[str, Any], base: str | None = None) -> str:
    """``BASE/page?params`` (a list value repeats its key; ``None`` values are left out); ``base=""``: relative."""
    b = base_url() if base is None else (base_url(base) if base else "")
    pairs: list[tuple[str, str]] = []
    for k, v in params.items():
        if v is None:
            continue
        if isinstance(v, (list, tuple)):
            pairs += [(k, str(x)) for x in v]
        else:
            pairs.append((k, str(v)))
    query = urlencode(pairs)
    path = f"{b}/{page}" if b else page
    return f"{path}?{query}" if query else path


def history_params(series: Mapping[str, Any], culprit: str | None = None) -> dict[str, Any]:
    """The History view of one series (a :class:`robocache.bench.schema.Series` as a dict, as alerts carry it):
    its machine, op, case, timer, cache and front end select the chart; provider and dtype narrow it to the
    series and its siblings measured another way (a method change shows as the break it is); ``series`` (its
    fingerprint) marks the line; ``culprit`` (a commit ``robocache-bench bisect`` named) is marked on it. A series
    judged by its interleaved call ratio (``measure``: ``call_ratio``, outside the fingerprint) opens on that
    metric (``metric=call_ratio``), so the finding's marker sits on the quantity it is about."""
    s = dict(series)
    return {"machine": s.get("machine"), "op": s.get("op") or str(s.get("case_id", "")).split("/")[0],
            "case": s.get("case_id"), "timer": s.get("timer"), "cache": s.get("cache"),
            "frontend": s.get("frontend"), "provider": s.get("provider"), "dtype": s.get("dtype"),
            "series": fingerprint(s), "culprit": culprit,
            "metric": RATIO_METRIC if s.get("measure") == RATIO_METRIC else None}


def history_url(series: Mapping[str, Any], base: str | None = None, culprit: str | None = None) -> str:
    """The link to ``series``' History view (see :func:`history_params`), with a bisected ``culprit`` marked."""
    return page_url(HISTORY_PAGE, history_params(series, culprit), base)


def run_url(run_id: str, base: str | None = None) -> str:
    """The link to one run on the Runs page."""
    return page_url(RUNS_PAGE, {"run": run_id}, base)
