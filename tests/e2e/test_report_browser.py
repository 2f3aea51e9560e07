"""The report and the index page in a real browser (headless Chromium from Debian): they render
without console errors, every figure loads, nothing is fetched from outside the page, and the
claims table has one row per claim. A screenshot of each page is kept under test-artifacts/.

Chromium and its driver are system packages (`make test` installs them); selenium drives them
and must never download a browser or driver of its own (SE_OFFLINE, explicit paths)."""

import base64
import os
import shutil
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from typer.testing import CliRunner

from attnlab.cli import app
from helpers import ROOT

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ARTIFACTS = ROOT / "test-artifacts" / "report-browser"


@pytest.fixture(scope="module")
def driver():
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    if missing:
        pytest.fail(
            f"{' and '.join(missing)} missing: `make test` installs them (Debian packages chromium and "
            "chromium-driver: apt-get install -y --no-install-recommends chromium chromium-driver)"
        )
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("selenium is missing: `make test` installs it (the dev extra)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        "--disable-extensions",
        "--no-first-run",
    ):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SE_OFFLINE", "true")  # selenium manager must not fetch anything
        d = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=opts)
    d.set_page_load_timeout(60)
    yield d
    d.quit()


@pytest.fixture(scope="module")
def pages(tmp_path_factory, smoke):
    """The session's smoke run's report, and an index over a copy of it and a second copy
    (rebuilt through the CLI)."""
    base = tmp_path_factory.mktemp("browser")
    shared = smoke("jiang2024-fig1")
    run, verdict = base / "jiang2024-fig1 smoke", shared.verdict
    shutil.copytree(shared.out, run)
    shutil.copytree(run, base / "copy")
    r = CliRunner().invoke(app, ["report", str(run), str(base / "copy")])
    assert r.exit_code == 0, r.output
    return {"report": run / "report.html", "index": base / "index.html", "verdict": verdict}


def load(driver, path: Path) -> dict:
    """Open a page and return what the checks need: SEVERE console entries, every image's
    natural width, every resource URL the page fetched."""
    driver.get_log("browser")  # drop entries of earlier pages
    driver.get(path.as_uri())
    assert driver.execute_script("return document.readyState") == "complete"
    return {
        "severe": [e for e in driver.get_log("browser") if e["level"] == "SEVERE"],
        "images": driver.execute_script(
            "return Array.from(document.images, i => [i.alt, i.complete, i.naturalWidth]);"
        ),
        "resources": driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name);"),
        "title": driver.title,
    }


def screenshot(driver, name: str) -> Path:
    """The whole page, not only the window (Chrome DevTools: capture beyond the viewport)."""
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 16000), "scale": 1}
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}
    )
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    path.write_bytes(base64.b64decode(shot["data"]))
    assert path.stat().st_size > 0
    print(f"screenshot: {path}")
    return path


def claim_rows(driver):
    from selenium.webdriver.common.by import By

    tables = driver.find_elements(By.ID, "claims-table")
    assert len(tables) == 1, "no claims table"
    return [tr.get_attribute("data-claim") for tr in tables[0].find_elements(By.CSS_SELECTOR, "tbody tr")]


def test_the_checks_catch_console_errors_and_broken_images(driver, tmp_path):
    """The checks below can fail: a page with a console error and a missing image is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text(
        '<!doctype html><html><head><link rel="icon" href="data:,"></head><body>'
        '<img src="missing.png" alt="x"><script>console.error("boom")</script></body></html>'
    )
    got = load(driver, bad)
    assert any("boom" in e["message"] for e in got["severe"])
    assert got["images"] == [["x", True, 0]]


def test_report_renders_in_chromium(driver, pages):
    got = load(driver, pages["report"])
    assert got["severe"] == [], got["severe"]
    assert got["images"], "the report has no figure"
    assert all(w > 0 for _, _, w in got["images"]), f"an image did not load: {got['images']}"
    assert all(u.startswith(("data:", "file:")) for u in got["resources"]), got["resources"]
    assert "jiang2024-fig1" in got["title"]
    assert claim_rows(driver) == [c["id"] for c in pages["verdict"]["claims"]]
    screenshot(driver, "report")


def test_index_renders_in_chromium_and_links_every_report(driver, pages):
    from selenium.webdriver.common.by import By

    got = load(driver, pages["index"])
    assert got["severe"] == [], got["severe"]
    assert all(u.startswith(("data:", "file:")) for u in got["resources"]), got["resources"]
    ids = [c["id"] for c in pages["verdict"]["claims"]]
    assert claim_rows(driver) == ids + ids  # the run and its copy
    links = [a.get_attribute("href") for a in driver.find_elements(By.CSS_SELECTOR, "#runs-table a")]
    assert len(links) == 2
    for href in links:
        assert Path(unquote(urlparse(href).path)).is_file(), href
    screenshot(driver, "index")
    driver.get(links[0])  # the link opens the report itself
    assert "jiang2024-fig1" in driver.title
    assert not [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
