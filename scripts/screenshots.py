#!/usr/bin/env python3
"""Screenshots of every dashboard page over the committed records, into docs/screenshots/<page>.png.

    python scripts/screenshots.py                   # every page of dashboard/app.py, full page, 1280 px wide
    python scripts/screenshots.py --pages sweeps architectures --out /tmp/shots

One Streamlit server and one Debian Chromium (dashboard/browser.py's machinery, as `make screenshot`), the pages
one after another; a page that shows an exception is reported and gets no picture (exit 1). The README's picture
(docs/dashboard-overview.png) is `make screenshot`.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dashboard import browser  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
# the tallest scrolled content on the page (Streamlit's main area scrolls inside the window)
_CONTENT_HEIGHT_JS = ("() => Math.max(document.documentElement.scrollHeight, ...[...document.querySelectorAll("
                      "'[data-testid=\"stMain\"], [data-testid=\"stAppViewContainer\"], section.main')]"
                      ".map(e => e.scrollHeight))")


def pages() -> list[tuple[str, str]]:
    """(file name, URL path) of every page app.py declares, in its order (the overview's path is empty)."""
    src = (REPO / "dashboard" / "app.py").read_text(encoding="utf-8")
    out = []
    for m in re.finditer(r'st\.Page\(_PAGES / "(\w+)\.py"([^)]*)\)', src):
        name, rest = m.group(1), m.group(2)
        url = re.search(r'url_path="([\w-]+)"', rest)
        out.append((name, "" if "default=True" in rest else (url.group(1) if url else name)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "screenshots", help="folder for the PNGs")
    ap.add_argument("--pages", nargs="+", default=None, help="page file names (default: every page)")
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=900)
    args = ap.parse_args(argv)
    known = pages()
    chosen = [p for p in known if args.pages is None or p[0] in args.pages]
    unknown = set(args.pages or ()) - {p[0] for p in known}
    if unknown:
        print(f"screenshots: no such page: {', '.join(sorted(unknown))} (pages: {', '.join(p for p, _ in known)})",
              file=sys.stderr)
        return 2
    if not os.access(browser.CHROMIUM, os.X_OK):
        print(f"screenshots: no Chromium at {browser.CHROMIUM}: `make chromium` installs Debian's", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    failed = []
    with tempfile.TemporaryDirectory(prefix="robocache-shots-") as tmp, \
            browser.serve([], log=Path(tmp) / "streamlit.log", timeout_s=120) as url, \
            browser.chromium(Path(tmp) / "profile", width=args.width, height=args.height) as page:
        # the first request of a fresh server goes to the root: one that opens on a page's own path runs that page
        # alone, without app.py's navigation and wide layout, when the entry script sits beside a pages/ folder
        # (Streamlit's old multipage mode, PagesManager.uses_pages_directory, until st.navigation has run once)
        page.goto(url)
        browser.wait_for_charts(page, 1, timeout_s=120)
        for name, path in chosen:
            page.goto(f"{url}/{path}")
            page.wait_for_selector("h1", timeout=120_000)
            try:  # a page with charts: until they have drawn (the Runs page has none)
                browser.wait_for_charts(page, 1, timeout_s=45)
            except Exception:  # noqa: BLE001 - playwright's TimeoutError: a page without charts
                pass
            browser.wait_idle(page, timeout_s=120)
            page.wait_for_timeout(2000)  # plotly's drawing and transitions
            if page.locator('[data-testid="stException"]').count() or page.locator('[data-testid="stAlertContentError"]').count():
                print(f"{name}: the page shows an error; no screenshot", file=sys.stderr)
                failed.append(name)
                continue
            out = args.out / f"{name}.png"
            # Streamlit scrolls its main area inside the window: the window made as tall as that content, so the
            # picture holds the whole page
            tall = int(page.evaluate(_CONTENT_HEIGHT_JS))
            page.set_viewport_size({"width": args.width, "height": max(args.height, min(tall + 40, 12000))})
            page.wait_for_timeout(1500)
            page.screenshot(path=str(out), full_page=True)
            page.set_viewport_size({"width": args.width, "height": args.height})
            print(f"wrote {out.relative_to(REPO) if out.is_relative_to(REPO) else out} "
                  f"({out.stat().st_size // 1024} KiB, {browser.wait_for_charts(page, 0)} charts)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
