"""The Pipelines page in a real Chromium (Debian's, driven by Playwright through dashboard/browser.py): it
renders from a CPU pipelines run and a relabelled H100 copy whose case ids carry a <script>, switches GPU,
draws its chart, and no record text becomes markup (no dialog, no page error, no Streamlit exception)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from dashboard import browser

REQUIRED = os.environ.get("ROBOCACHE_REQUIRE_BROWSER", "") == "1"


def _missing() -> str:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the Python package playwright is not installed (it is in the [dev] extra)"
    if not os.access(browser.CHROMIUM, os.X_OK):
        return f"no Chromium at {browser.CHROMIUM}; `make test` installs it (apt-get install chromium)"
    return ""


MISSING = _missing()
if MISSING and not REQUIRED:
    pytest.skip(f"PIPELINES BROWSER TEST NOT RUN: {MISSING}", allow_module_level=True)

from tests.test_pipelines_io import results  # noqa: E402,F401 - the fixture: a CPU run and an H100 copy


def test_pipelines_page_in_chromium(results: Path, tmp_path: Path) -> None:  # noqa: F811
    if MISSING:
        pytest.fail(f"PIPELINES BROWSER TEST NOT RUN: {MISSING} (ROBOCACHE_REQUIRE_BROWSER=1)", pytrace=False)
    dialogs: list[str] = []
    errors: list[str] = []
    shots = Path(os.environ.get("ROBOCACHE_SCREENSHOTS") or tmp_path)
    with browser.serve(["--no-default-results", "--results", str(results)], log=tmp_path / "streamlit.log") as url, \
            browser.chromium(tmp_path / "profile") as page:
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url)
        page.get_by_test_id("stSidebarNav").get_by_role("link", name="Pipelines").click()
        # the Pipelines page's own widget first, so the charts counted are its own, not the overview's
        page.get_by_role("combobox", name="GPU", exact=True).wait_for()
        assert browser.wait_for_charts(page, 1) >= 1
        browser.wait_idle(page)
        # the first screen is the GPU run (the other pages' default rule), not the CPU run that sorts first
        page.wait_for_function("() => [...document.querySelectorAll('h3')].some(e => e.textContent.includes('H100'))",
                               timeout=browser.TIMEOUT_MS)
        assert page.get_by_text("NumPy fallback").count() == 0
        browser.select(page, "GPU", "CPU")
        browser.wait_idle(page)
        page.wait_for_function("() => [...document.querySelectorAll('h3')].some(e => e.textContent.includes("
                               "'Data loading by batch size on CPU'))", timeout=browser.TIMEOUT_MS)
        assert page.get_by_text("NumPy fallback").count() >= 1
        browser.select(page, "GPU", "H100")
        browser.wait_idle(page)
        page.wait_for_function("() => [...document.querySelectorAll('h3')].some(e => e.textContent.includes('H100'))",
                               timeout=browser.TIMEOUT_MS)
        assert browser.wait_for_charts(page, 1) >= 1
        assert page.locator('[data-testid="stException"]').count() == 0
        assert page.locator(".js-plotly-plot svg a").count() == 0
        assert page.locator("body script").evaluate_all(
            "els => els.filter(e => e.textContent.includes('alert(1)')).length") == 0
        page.screenshot(path=str(shots / "pipelines.png"), full_page=True)
    assert not dialogs and not errors, (dialogs, errors)
