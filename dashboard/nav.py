"""Page routing that forgives the case of a path: ``/History?machine=...`` opens History with its selections, and a
path that names no page says so instead of silently showing the Overview.

Streamlit matches a URL's path to a page's ``url_path`` exactly and runs the default page otherwise, without a
word: a hand-typed or re-cased deep link (``/History``, ``/WINS``) lost its view. :func:`route` runs after
``st.navigation``: when Streamlit fell back to the default page, it reads the path the browser asked for
(``st.context.url``, the server's base path left out), switches to the page whose path matches it ignoring case
(the query parameters kept), or shows a "no such page" error above the default page. Pure parts
(:func:`requested_path`, :func:`match`) are unit-tested; the browser test drives the rest.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlparse


def requested_path(url: str | None, base: str = "") -> str | None:
    """The page path in ``url`` after the server's base path ``base`` (``server.baseUrlPath``), without slashes:
    ``""`` for the app's root; None when the URL is unknown (no browser, as under AppTest) or outside ``base``."""
    if not url:
        return None
    path = urlparse(url).path.strip("/")
    base = base.strip("/")
    if base:
        if path == base:
            return ""
        if not path.startswith(base + "/"):
            return None
        path = path[len(base) + 1:]
    return path


def match(asked: str, url_paths: Sequence[str]) -> str | None:
    """The page path among ``url_paths`` that ``asked`` names ignoring case (``History`` -> ``history``); None when
    none does."""
    want = asked.casefold()
    return next((p for p in url_paths if p and p.casefold() == want), None)


def route(page: Any, pages: Sequence[Any], default: Any) -> None:
    """After ``st.navigation(pages)`` chose ``page``: when that is the ``default`` page but the browser asked for
    another path, switch to the page that path names ignoring case (keeping the query parameters), or say that no
    page has it."""
    import streamlit as st

    from .data import md_escape

    if page is not default:
        return
    try:
        asked = requested_path(st.context.url, str(st.get_option("server.baseUrlPath") or ""))
    except Exception:  # noqa: BLE001 - no browser context: nothing asked
        return
    if not asked:
        return
    target = match(asked, [p.url_path for p in pages])
    if target is not None:
        params = {k: st.query_params.get_all(k) for k in st.query_params}
        st.switch_page(next(p for p in pages if p.url_path == target), query_params=params)
    known = ", ".join(f"/{p.url_path}" for p in pages if p.url_path)
    st.error(f"No page at /{md_escape(asked)}: this is the {md_escape(default.title)}. The pages are "
             f"{md_escape(known)}.")
