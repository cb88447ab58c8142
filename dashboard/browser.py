"""Serve the dashboard and drive a real Chromium through Playwright: the machinery of the browser test
(``tests/test_browser.py``) and of the README's screenshot::

    .venv/bin/python -m dashboard.browser docs/dashboard-overview.png --charts 2 \\
        -- --no-default-results --results results/h200-nvidia-h200      # (make screenshot)

Chromium is Debian's ``/usr/bin/chromium`` (``make test`` installs it with apt-get); Playwright only
drives it and never downloads a browser (no ``playwright install``). Playwright is a ``[dev]``
dependency, imported when a browser is launched, so the dashboard itself does not need it.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
APP = REPO / "dashboard" / "app.py"
CHROMIUM = os.environ.get("ROBOCACHE_CHROMIUM", "/usr/bin/chromium")
# Headless, no sandbox (CI runs as root), and no background traffic: on a closed network Chromium's own
# connections (updates, sync, QUIC probes) are refused and only slow it down.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# How long a wait for the server or the page may take before it fails: generous, not a speed test. On a quiet
# machine each wait ends in seconds; CI shares two cores with other jobs and may run several times slower, with
# stalls of seconds (issue 16: no test may fail only because the machine is loaded). Also the page's default
# timeout for Playwright's own actions and waits (clicks, goto, locator waits), 30 s otherwise.
TIMEOUT_S = 120.0
TIMEOUT_MS = int(TIMEOUT_S * 1000)
# Streamlit's own line naming the address it listens on ("URL: http://127.0.0.1:PORT"; "Local URL: ..." when no
# address is set)
_URL_LINE = re.compile(rb"URL: (http://127\.0\.0\.1:(\d+))\s")
# Plotly graph divs that have finished drawing (plotly sets _fullLayout and adds its SVG layers).
_DRAWN_JS = ("() => [...document.querySelectorAll('.js-plotly-plot')]"
             ".filter(d => d._fullLayout && d.querySelector('.main-svg')).length")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the OS picks it). Another process may take it before it is bound:
    :func:`serve` lets the OS pick its port as it binds instead."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve(app_args: Sequence[str] = (), *, port: int | None = None, log: Path | None = None,
          timeout_s: float = TIMEOUT_S) -> Iterator[str]:
    """``streamlit run dashboard/app.py -- APP_ARGS`` on 127.0.0.1, headless; yields its URL.

    Without ``port`` Streamlit binds port 0 (the OS picks a free one as it binds, so no other process can take it
    first, as one could a port picked here and bound later) and its URL is read from its output. Waits for
    Streamlit's health endpoint; the server is stopped on exit. Its output goes to ``log`` (or a temporary
    file); a server that dies or does not answer in ``timeout_s`` raises ``RuntimeError`` with the end of that
    log.
    """
    with contextlib.ExitStack() as stack:
        if log is None:
            log = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="robocache-serve-"))) / "streamlit.log"
        cmd = [sys.executable, "-m", "streamlit", "run", str(APP), "--server.address", "127.0.0.1",
               "--server.port", str(port or 0), "--server.headless", "true", "--browser.gatherUsageStats", "false",
               "--server.fileWatcherType", "none", "--logger.hideWelcomeMessage", "false", "--", *app_args]
        out = stack.enter_context(open(log, "wb"))
        # its output unbuffered: the URL line must reach the log while it runs
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            deadline = time.monotonic() + timeout_s
            url = f"http://127.0.0.1:{port}" if port else None
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"streamlit exited with {proc.returncode}: {_tail(log)}")
                if url is None:
                    m = _URL_LINE.search(log.read_bytes())
                    url = m.group(1).decode() if m else None
                    if m and int(m.group(2)) == 0:  # Streamlit before March 2026 printed the port asked for
                        raise RuntimeError("streamlit reported port 0, not the port it bound: this Streamlit is too "
                                           "old for serve() without port= (upgrade streamlit, or pass port=)")
                if url is not None:
                    try:
                        with urllib.request.urlopen(url + "/_stcore/health", timeout=10) as r:  # noqa: S310 - loopback
                            if r.read().strip() == b"ok":
                                break
                    except OSError:
                        pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"streamlit did not answer on {url or 'its port'} in {timeout_s:.0f} s: "
                                       f"{_tail(log)}")
                time.sleep(0.2)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _tail(log: Path | None, n: int = 2000) -> str:
    if not log or not log.exists():
        return "(no log)"
    return log.read_text(encoding="utf-8", errors="replace")[-n:]


@contextlib.contextmanager
def chromium(profile: Path, *, width: int = 1400, height: int = 1000) -> Iterator[Any]:
    """A Playwright page in Debian's headless Chromium with a fresh profile folder ``profile``."""
    from playwright.sync_api import sync_playwright  # a [dev] dependency: only here

    with sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": width, "height": height})
        ctx.set_default_timeout(TIMEOUT_MS)  # every action and wait of the page's, unless given its own
        ctx.set_default_navigation_timeout(TIMEOUT_MS)
        try:
            yield ctx.pages[0] if ctx.pages else ctx.new_page()
        finally:
            ctx.close()


_SETTLED_JS = ("() => [(" + _DRAWN_JS + ")(), !!document.querySelector('[data-testid=\"stStatusWidget\"]')]")


def wait_for_charts(page: Any, n: int = 1, timeout_s: float = TIMEOUT_S, quiet_s: float = 1.0) -> int:
    """Wait until at least ``n`` Plotly charts have drawn and the page has settled (no rerun running, the number
    of drawn charts unchanged for ``quiet_s``); their number then. A count read the moment it first reached
    ``n`` could be the old page's charts, which a rerun then replaces one by one: on a loaded CI machine a
    test once read 3 of 4 that way."""
    deadline = time.monotonic() + timeout_s
    page.wait_for_function(f"n => ({_DRAWN_JS})() >= n", arg=n, timeout=timeout_s * 1000)
    last, since = None, time.monotonic()
    while True:
        count, running = page.evaluate(_SETTLED_JS)
        now = time.monotonic()
        if (count, running) != last:
            last, since = (count, running), now
        elif count >= n and not running and now - since >= quiet_s:
            return int(count)
        if now > deadline:
            raise TimeoutError(f"the page did not settle with {n} chart(s) drawn within {timeout_s:g} s "
                               f"(last: {count} drawn, {'a rerun running' if running else 'idle'})")
        page.wait_for_timeout(100)


def wait_idle(page: Any, timeout_s: float = TIMEOUT_S) -> None:
    """Wait until Streamlit has finished the current rerun (its "running" status widget is gone)."""
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')",
                           timeout=timeout_s * 1000)


def select(page: Any, label: str, option: str, tries: int = 3) -> None:
    """Pick ``option`` in the selectbox labelled ``label`` (a combobox with a listbox of options). The box is
    scrolled into view first, and clicked again when its list did not open: a click on a box far down a long page
    (the Overview's) landed while Streamlit's main area was still scrolling to it, which focused the box without
    opening it."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    box = page.get_by_role("combobox", name=label, exact=True)
    want = page.get_by_role("option", name=option, exact=True)
    box.scroll_into_view_if_needed()
    for i in range(tries):
        box.click()
        try:
            want.wait_for(timeout=TIMEOUT_MS if i == tries - 1 else 10_000)
            break
        except PlaywrightTimeout:
            if i == tries - 1:
                raise
            page.keyboard.press("Escape")  # close whatever half-opened, then try again
    want.click()


def chart_texts(page: Any, selector: str) -> list[str]:
    """The text of every ``selector`` element inside the Plotly charts (``.gtitle``, ``.legendtext``, ...)."""
    return page.locator(f".js-plotly-plot {selector}").all_text_contents()


def main(argv: Sequence[str] | None = None) -> int:
    """Screenshot one page of the dashboard (after optional selections) into a PNG."""
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0],
                                 epilog="Arguments after -- go to the dashboard (--results DIR ..., "
                                        "--no-default-results).")
    ap.add_argument("out", type=Path, help="PNG to write")
    ap.add_argument("--page", default="", help="page path, e.g. sweeps (default: the overview)")
    ap.add_argument("--select", action="append", default=[], metavar="LABEL=OPTION",
                    help="pick OPTION in the selectbox LABEL before the screenshot (repeatable)")
    ap.add_argument("--charts", type=int, default=1, help="wait for this many charts (default 1)")
    ap.add_argument("--width", type=int, default=1400)
    ap.add_argument("--height", type=int, default=1250)
    argv = list(sys.argv[1:] if argv is None else argv)
    app_args = argv[argv.index("--") + 1:] if "--" in argv else []
    args = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    if not os.access(CHROMIUM, os.X_OK):
        print(f"no Chromium at {CHROMIUM}: `make chromium` installs Debian's", file=sys.stderr)
        return 2
    import tempfile

    with tempfile.TemporaryDirectory(prefix="robocache-shot-") as tmp, \
            serve(app_args, log=Path(tmp) / "streamlit.log") as url, \
            chromium(Path(tmp) / "profile", width=args.width, height=args.height) as page:
        page.goto(f"{url}/{args.page}")
        page.wait_for_selector("h1")  # the page itself has run (a page without charts: --charts 0)
        wait_idle(page)
        wait_for_charts(page, args.charts)
        for sel in args.select:
            label, _, option = sel.partition("=")
            select(page, label, option)
            page.evaluate("() => document.activeElement && document.activeElement.blur()")  # no focus ring
            wait_idle(page)
            wait_for_charts(page, args.charts)
        if page.locator('[data-testid="stException"]').count():
            print("the page shows an exception; no screenshot", file=sys.stderr)
            return 1
        # metrics and tables still drawn as placeholders (Streamlit's skeletons) right after a rerun, or a cached
        # computation's spinner (the regression check) still turning
        page.wait_for_function("() => !document.querySelector('[data-testid^=\"stSkeleton\"], "
                               "[data-testid=\"stSpinner\"]')")
        wait_idle(page)
        # every table drawn (Streamlit draws a dataframe into a canvas once its data has arrived)
        page.wait_for_function("() => [...document.querySelectorAll('[data-testid=\"stDataFrame\"]')]"
                               ".every(d => d.querySelector('canvas'))")
        page.wait_for_timeout(1500)  # plotly's transitions
        args.out.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(args.out))
    print(f"wrote {args.out} ({args.out.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
