"""The alert's link in a real browser: ``robocache-bench check --json --dashboard-url URL`` over a rehearsed
history (tests/history_rehearsal.py: +10% at night 14, a method change at night 6; synthetic records), then
Chromium opens the alert's ``link`` on a served dashboard and finds the view it names: the selections restored,
the alert marker (its size as text) drawn, the method change drawn as a break. The Regressions page lists it.

Skipped like tests/test_browser.py without Playwright or Chromium (a failure with ROBOCACHE_REQUIRE_BROWSER=1).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import urljoin

import pytest

from dashboard import browser
from tests.test_browser import MISSING, REQUIRED

if MISSING and not REQUIRED:
    pytest.skip(f"DASHBOARD BROWSER TEST NOT RUN: {MISSING}", allow_module_level=True)

from robocache.bench import cli
from tests import history_rehearsal as hr


def test_alert_link_opens_history_with_the_marker(tmp_path: Path) -> None:
    if MISSING:
        pytest.fail(f"DASHBOARD BROWSER TEST NOT RUN: {MISSING} (ROBOCACHE_REQUIRE_BROWSER=1)", pytrace=False)
    hist = hr.write(tmp_path / "history")
    shots = Path(os.environ.get("ROBOCACHE_SCREENSHOTS") or tmp_path)
    js = tmp_path / "alerts.json"
    errors: list[str] = []
    # the server first, on the port the OS gives it as it binds (a port picked before and bound later could be
    # taken in between by another job on a shared machine); the check's links then name its URL
    # only this history (--no-default-results): the committed results/ hold real alerts of their own, which the
    # Regressions page's counts below would include
    with browser.serve(["--no-default-results", "--results", str(hist)], log=tmp_path / "streamlit.log") as url, \
            browser.chromium(tmp_path / "profile") as page:
        assert cli.main(["check", str(hist), "--json", str(js), "--dashboard-url", url]) == 0
        alert = json.loads(js.read_text())["alerts"][0]
        assert alert["link"].startswith(url + "/history?")
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(alert["link"])
        browser.wait_for_charts(page, 1)
        # the link is this fresh server's first request: app.py ran (its page titles in the sidebar, not the files'
        # names), as it does only because the pages are not in a folder named pages/ (Streamlit's old multipage
        # mode would run history.py alone, narrow, with a sidebar of file names)
        nav = page.locator('[data-testid="stSidebarNav"]')
        nav.get_by_text("Where robocache wins").first.wait_for(timeout=browser.TIMEOUT_MS)
        assert nav.get_by_text("Regressions").count() >= 1
        # the marker: its size drawn as text beside the triangle at the first commit after the change
        size = f"{(alert['ratio'] - 1) * 100:+.1f}%"
        page.wait_for_function(
            "t => [...document.querySelectorAll('.js-plotly-plot .textpoint text')].some(e => e.textContent === t)",
            arg=size, timeout=browser.TIMEOUT_MS)
        browser.wait_idle(page)
        assert page.locator('[data-testid="stException"]').count() == 0
        assert "method change" in browser.chart_texts(page, ".annotation-text")
        ticks = browser.chart_texts(page, ".xtick")
        assert hr.commit(hr.STEP_NIGHT)[:8] in ticks, ticks
        page.screenshot(path=str(shots / "history-alert-link.png"))
        # the page writes its selections back into the URL: still the linked machine and case, not a default
        assert f"machine={hr.MACHINE}" in page.url and "case=resample%2FB256-S100-T50-D32" in page.url, page.url
        legend = browser.chart_texts(page, ".legendtext")
        assert legend == ["robocache float32 method v1", "robocache float32 method v2"], legend

        # click-through: a point of the line (night 10: the 5th point of method v2) links its run on the Runs page
        night = 10
        pt = page.locator(".js-plotly-plot .scatterlayer .trace .points path").nth(night)
        box = pt.bounding_box()
        assert box, "the point is not drawn"
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        link = page.get_by_role("link", name="open on the Runs page").first
        link.wait_for(timeout=browser.TIMEOUT_MS)
        assert link.get_attribute("href") == f"runs?run={hr.run_id(night)}"
        page.goto(urljoin(page.url, link.get_attribute("href")))  # Streamlit opens markdown links in a new tab
        assert page.url.startswith(f"{url}/runs?run={hr.run_id(night)}")
        # the run's own commit
        page.get_by_text(hr.commit(night), exact=False).first.wait_for(timeout=browser.TIMEOUT_MS)
        assert page.locator('[data-testid="stException"]').count() == 0

        page.goto(url + "/regressions")
        page.get_by_text("open alerts").first.wait_for(timeout=browser.TIMEOUT_MS)
        browser.wait_idle(page)
        assert page.locator('[data-testid="stException"]').count() == 0
        metric = page.locator('[data-testid="stMetric"]', has_text="open alerts")
        assert metric.locator('[data-testid="stMetricValue"]').inner_text().strip() == "1"
        page.screenshot(path=str(shots / "regressions.png"))
    assert not errors, errors
