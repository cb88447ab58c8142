"""The dashboard in a real browser: ``streamlit run dashboard/app.py`` on a 127.0.0.1 port (the OS picks it), driven
by Playwright in Debian's headless Chromium (``/usr/bin/chromium``; ``make test`` installs it).

Over generated, SYNTHETIC records (two architectures, a ``<script>`` case id, providers and a machine
named with Plotly markup, a bad file named ``<img onerror>``): the charts draw, a filter change redraws
them, nothing from a result file becomes markup or runs (no dialog opens, the text shows as typed), no
page shows an exception. Screenshots go to the test's tmp folder (or ``$ROBOCACHE_SCREENSHOTS``).

Without Chromium the test is skipped with the reason; with ``ROBOCACHE_REQUIRE_BROWSER=1`` (set by
``.ci/run``) it fails instead, so CI cannot pass without running it.
"""
from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dashboard import browser
from robocache.providers import label

REQUIRED = os.environ.get("ROBOCACHE_REQUIRE_BROWSER", "") == "1"


def _missing() -> str:
    """Why the browser test cannot run here ("" when it can)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the Python package playwright is not installed (it is in the [dev] extra)"
    if not os.access(browser.CHROMIUM, os.X_OK):
        return (f"no Chromium at {browser.CHROMIUM}; `make test` installs it (apt-get install chromium), "
                "or run `make chromium`")
    return ""


MISSING = _missing()
if MISSING and not REQUIRED:
    pytest.skip(f"DASHBOARD BROWSER TEST NOT RUN: {MISSING}", allow_module_level=True)

from robocache.bench.store import write_records  # noqa: E402
from tests.test_dashboard import BAD_NAME, SCRIPT, fixture_record, gpu_env  # noqa: E402

BOLD = "<b>bold</b>"  # a provider name: plotly would draw it bold if it took it as markup
LINK = '<a href="javascript:alert(2)">m</a>'  # in a machine name: plotly would draw a link
CASE = f"resample/{SCRIPT}"


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SYNTHETIC records: H200 (robocache, torch_eager, "<b>bold</b>") and B200 (robocache, cupy) on a
    machine named with a link, three commits each, a <script> case, a bad file named <img onerror>."""
    out = tmp_path_factory.mktemp("browser-results")
    layouts = (("H200", "synthetic-h200", 1.0, {"robocache": "robocache", "torch_eager": "torch_eager",
                                                 "cupy": BOLD}),
               ("B200", f"synthetic-b200 {LINK}", 0.6, {"robocache": "robocache", "cupy": "cupy"}))
    for arch, machine, scale, providers in layouts:
        for run in range(3):
            recs = []
            for speed_key, name in providers.items():
                for case, b in [(f"resample/B{b}-S100-T50-D32", b) for b in (16, 64, 256)] + [(CASE, 8)]:
                    r = fixture_record(run, case, speed_key, b, arch_scale=scale, commit=f"{run:x}" * 40,
                                       created=f"2026-01-0{run + 1}T00:00:00Z")
                    r["case"]["provider"] = name
                    recs.append(r)
            write_records(out, gpu_env(arch, machine), recs, name=f"{arch.lower()}-run{run}")
    (out / BAD_NAME).write_text("{not json", encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    env = os.environ.get("ROBOCACHE_SCREENSHOTS")
    out = Path(env) if env else tmp_path_factory.mktemp("screenshots")
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.fixture(scope="module")
def server(results: Path, multigpu_results: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One Streamlit server for this module's tests, over both record sets (the single-GPU pages read only
    single-GPU records, the Multi-GPU page only multi-GPU ones): a server's start is the costly part."""
    if MISSING:  # only with ROBOCACHE_REQUIRE_BROWSER=1 (CI): a failure, not a skip
        pytest.fail(f"DASHBOARD BROWSER TEST NOT RUN: {MISSING} (ROBOCACHE_REQUIRE_BROWSER=1)", pytrace=False)
    log = tmp_path_factory.mktemp("streamlit") / "streamlit.log"
    with browser.serve(["--no-default-results", "--results", str(results), str(multigpu_results)], log=log) as url:
        yield url


def _no_exception(page: Any, where: str) -> None:
    exc = page.locator('[data-testid="stException"]')
    assert exc.count() == 0, f"{where}: Streamlit exception(s) on the page: {exc.all_inner_texts()}"


def _no_markup_in_charts(page: Any, where: str) -> None:
    """Plotly drew no link (it draws <a href> as an SVG link) and no bold legend entry or tick label (it
    draws <b> as a bold tspan). Titles are left out: Streamlit's Plotly theme sets them in bold itself;
    their text is checked as typed instead."""
    assert page.locator(".js-plotly-plot svg a").count() == 0, where
    bold = page.locator(", ".join(f'.js-plotly-plot {part} tspan[style*="bold"]'
                                  for part in (".legendtext", ".xtick", ".ytick", ".annotation")))
    assert bold.count() == 0, (where, bold.all_text_contents())


def test_dashboard_in_chromium(server: str, shots: Path, tmp_path: Path) -> None:
    t0 = time.perf_counter()
    dialogs: list[str] = []
    errors: list[str] = []
    url = server
    with browser.chromium(tmp_path / "profile") as page:
        assert url.startswith("http://127.0.0.1:")
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.on("pageerror", lambda e: errors.append(str(e)))

        # Overview: the morning page (robocache leads everywhere in these fixtures: no losses chart), then the
        # first architecture (B200) in detail, every case ranked against its strongest peer (CuPy)
        page.goto(url + "/")
        assert browser.wait_for_charts(page, 1) >= 1
        browser.wait_idle(page)
        _no_exception(page, "overview")
        assert page.get_by_text("SYNTHETIC", exact=False).count() >= 1  # the fixture says what it is
        assert page.get_by_text("robocache against the strongest peer").count() >= 1
        assert page.get_by_text("Last night's regression check").count() >= 1
        legend = browser.chart_texts(page, ".legendtext")
        assert label("cupy") in legend and BOLD not in legend, legend  # providers by their readable label
        page.screenshot(path=str(shots / "overview-b200.png"))

        # change a filter: H200; the ranked chart redraws with that machine's strongest peer ("<b>bold</b>")
        browser.select(page, "architecture", "H200")
        # every chart redrawn: the new machine's peer present AND the old one's gone (waiting for the first alone
        # raced a second chart still showing the old machine on a loaded CI machine)
        page.wait_for_function(
            "([t, gone]) => { const xs = [...document.querySelectorAll('.js-plotly-plot .legendtext')]"
            ".map(e => e.textContent); return xs.includes(t) && !xs.includes(gone); }",
            arg=[BOLD, label("cupy")], timeout=browser.TIMEOUT_MS)
        browser.wait_idle(page)
        assert browser.wait_for_charts(page, 1) >= 1
        _no_exception(page, "overview, H200")
        legend = browser.chart_texts(page, ".legendtext")
        assert BOLD in legend and label("cupy") not in legend, legend  # BOLD as typed
        # the case names level on the y axis, ranked (horizontal bars): the <script> case id as text
        assert any(SCRIPT in t for t in browser.chart_texts(page, ".ytick")), browser.chart_texts(page, ".ytick")
        _no_markup_in_charts(page, "overview, H200")
        page.screenshot(path=str(shots / "overview-h200.png"))

        # Architectures (through the sidebar): the machine name with a link in the legend, as text
        page.get_by_test_id("stSidebarNav").get_by_role("link", name="Architectures").click()
        page.wait_for_function(
            "t => [...document.querySelectorAll('.js-plotly-plot .legendtext')].some(e => e.textContent.includes(t))",
            arg=LINK, timeout=browser.TIMEOUT_MS)
        browser.wait_idle(page)
        _no_exception(page, "architectures")
        _no_markup_in_charts(page, "architectures")
        page.screenshot(path=str(shots / "architectures.png"))

        # History: pick the <script> case; the chart's title carries it, as text
        page.get_by_test_id("stSidebarNav").get_by_role("link", name="History").click()
        # the History page's own widget first: the charts counted next are then its own, never the Architectures
        # page's still on screen before the rerun starts (a loaded machine can take more than the settle time)
        page.get_by_role("combobox", name="machine", exact=True).wait_for()
        browser.wait_for_charts(page, 1)
        browser.wait_idle(page)
        browser.select(page, "machine", "synthetic-h200")
        # by default robocache and that machine's strongest peer (the "<b>bold</b>" one, 2.5x to torch eager's 4x)
        page.wait_for_function(
            "t => [...document.querySelectorAll('.js-plotly-plot .legendtext')].some(e => e.textContent === t)",
            arg=f"{BOLD} float32", timeout=browser.TIMEOUT_MS)
        browser.wait_idle(page)
        browser.select(page, "case", CASE)
        want = f"{CASE}: median time per call (us)"
        page.wait_for_function(
            "t => [...document.querySelectorAll('.js-plotly-plot .gtitle')].some(e => e.textContent === t)",
            arg=want, timeout=browser.TIMEOUT_MS)
        browser.wait_idle(page)
        _no_exception(page, "history")
        assert page.locator("script", has_text="alert(1)").count() == 0
        assert f"{BOLD} float32" in browser.chart_texts(page, ".legendtext")
        _no_markup_in_charts(page, "history")
        page.screenshot(path=str(shots / "history-script-case.png"))

        # a deep link with the page's name capitalised (/History) opens History with its selections, not the
        # Overview (issue 24: Streamlit matches paths exactly and fell back to the default page without a word)
        page.goto(url + "/History?machine=synthetic-h200&provider=torch_eager&dtype=float32")
        page.get_by_role("heading", name="History").wait_for(timeout=browser.TIMEOUT_MS)
        page.wait_for_function(
            "t => [...document.querySelectorAll('.js-plotly-plot .legendtext')].map(e => e.textContent)"
            ".join('|') === t", arg=f"{label('torch_eager')} float32", timeout=browser.TIMEOUT_MS)
        browser.wait_idle(page)
        _no_exception(page, "/History")
        assert "/history?" in page.url and "provider=torch_eager" in page.url, page.url
        # a path that names no page says so (404-style) above the Overview
        page.goto(url + "/no-such-page")
        page.get_by_text("No page at /no-such-page", exact=False).first.wait_for(timeout=browser.TIMEOUT_MS)
        browser.wait_idle(page)
        _no_exception(page, "/no-such-page")

        # Runs: the bad file's name <img src=x onerror=alert(1)> listed as text, no <img> made of it
        page.goto(url + "/runs")
        page.get_by_text("onerror=alert(1)", exact=False).first.wait_for(timeout=browser.TIMEOUT_MS)
        browser.wait_idle(page)
        _no_exception(page, "runs")
        assert page.locator('img[src="x"]').count() == 0
        page.screenshot(path=str(shots / "runs.png"))

    took = time.perf_counter() - t0
    print(f"\nbrowser test: {took:.1f} s; screenshots in {shots}")
    assert not dialogs, f"a dialog opened: record text ran as script: {dialogs}"
    assert not errors, f"uncaught errors in the page: {errors}"
    for name in ("overview-b200.png", "overview-h200.png", "architectures.png", "history-script-case.png",
                 "runs.png"):
        assert (shots / name).stat().st_size > 10_000, name  # a drawn page, not an empty image
    # its wall time is printed above, never asserted: a busy machine must not fail this test (issue 16)


@pytest.fixture(scope="module")
def multigpu_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SYNTHETIC multi-GPU records (1-8 GPUs, weak and strong, gathered or not) on two architectures, one machine
    named with a link, a provider named with markup, a crashed case."""
    from tests.test_dashboard import multigpu_record

    out = tmp_path_factory.mktemp("browser-multigpu")
    for arch, machine, scale in (("H200", "synthetic-h200-x8", 1.0), ("B200", f"synthetic-b200-x8 {LINK}", 0.6)):
        recs = [multigpu_record(scale, "B4096-S100-T50-D32", s, g, k) for s in ("weak", "strong")
                for g in ("none", "all") for k in (1, 2, 4, 8)]
        recs += [multigpu_record(scale, "B4096-S100-T50-D32", "weak", "all", k, provider=BOLD) for k in (1, 2)]
        crashed = multigpu_record(scale, "B4096-S100-T50-D32", "strong", "one", 8)
        crashed.update(status="crash", reason="rank 5 died", metrics=None, method=None, distributed=None)
        write_records(out, gpu_env(arch, machine), [*recs, crashed], name=f"{arch.lower()}-multigpu")
    return out


def test_multigpu_page_in_chromium(server: str, shots: Path, tmp_path: Path) -> None:
    """The Multi-GPU page draws its scaling lines and bandwidth bars per architecture, redraws on a metric change,
    and shows record text as typed."""
    errors: list[str] = []
    dialogs: list[str] = []
    url = server
    with browser.chromium(tmp_path / "profile") as page:
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url + "/multigpu")
        assert browser.wait_for_charts(page, 4) >= 4  # two architectures x (efficiency lines, gather bars)
        browser.wait_idle(page)
        _no_exception(page, "multigpu")
        _no_markup_in_charts(page, "multigpu")
        legend = browser.chart_texts(page, ".legendtext")
        assert f"resample/B4096-S100-T50-D32-weak-allgather {BOLD}" in legend, legend
        assert any(LINK in t for t in browser.chart_texts(page, ".gtitle")) is False  # machines are not in titles
        page.screenshot(path=str(shots / "multigpu.png"), full_page=True)
        browser.select(page, "metric", "aggregate items per second")
        # the new metric's title first (the rerun's output), then every chart drawn and the page settled
        page.wait_for_function("() => [...document.querySelectorAll('.js-plotly-plot .gtitle')]"
                               ".some(t => t.textContent.includes('aggregate items per second'))",
                               timeout=browser.TIMEOUT_MS)
        browser.wait_idle(page)
        assert browser.wait_for_charts(page, 4) >= 4
        _no_exception(page, "multigpu (aggregate)")
    assert not dialogs and not errors, (dialogs, errors)
    assert (shots / "multigpu.png").stat().st_size > 10_000
