"""The web page in a real browser: headless Debian chromium driven by Playwright (the system's browser, no
``playwright install`` download) against a real ``adlnmt serve``: type a sentence, click Translate, see the
translation, the n-best list, the attention heatmap (hover shows a weight) and the architecture diagram; and the
offline API page."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx2
import pytest

from serve.server import running_server

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser():  # type: ignore[no-untyped-def]
    sync_api = pytest.importorskip("playwright.sync_api", reason="the serve extra's playwright is not installed")
    if not Path(CHROMIUM).is_file():
        pytest.skip("chromium is missing (as root: apt-get install -y chromium; `make install` does it)")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield browser
        browser.close()


def test_translate_in_the_page(browser, serve_model: Path, test_lines: list[str], tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sentence = test_lines[1]
    with running_server(serve_model, log=tmp_path / "serve.log") as (_, url):
        expected = httpx2.post(f"{url}/translate", json={"text": [sentence], "beam": 4, "nbest": 3,
                                                        "alignments": True}).json()["translations"][0]  # fmt: skip
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda err: errors.append(str(err)))
        page.on("requestfailed", lambda request: errors.append(f"request failed: {request.url}"))
        page.goto(url + "/")
        page.wait_for_selector("#diagram svg", timeout=30_000)
        assert "parameters" in page.inner_text("#model-line")
        assert page.inner_text("#adl").startswith("encoder: pos -> repeat(2,")
        page.fill("#source", sentence)
        page.fill("#beam", "4")
        page.fill("#nbest", "3")
        page.click("#translate")
        page.wait_for_selector(".result .translation", timeout=60_000)
        page.wait_for_selector("table.heatmap td", timeout=10_000)
        assert page.inner_text(".result .source") == sentence
        assert page.inner_text(".result .translation") == expected["translation"]
        nbest = page.locator("ol.nbest li")
        assert nbest.count() == 3
        assert [nbest.nth(i).inner_text().split("score")[0].strip() for i in range(3)] == [
            hyp["translation"] for hyp in expected["nbest"]]  # fmt: skip
        rows = page.locator("table.heatmap tbody tr")
        assert rows.count() == len(expected["pieces"]) + 1
        assert page.locator("table.heatmap tbody tr:first-child td").count() == len(expected["source_pieces"])
        cell = page.locator("table.heatmap tbody tr:first-child td").first
        cell.hover()
        weight = expected["alignment"][0][0]
        assert page.inner_text(".hover-weight").endswith(f": {weight:.3f}")
        assert cell.get_attribute("title").endswith(f": {weight:.3f}")
        assert "done in" in page.inner_text("#status")
        page.screenshot(path=str(tmp_path / "serve-page.png"), full_page=True)
        page.goto(url + "/docs")  # the offline API page renders /openapi.json
        page.wait_for_selector("#api h3", timeout=10_000)
        operations = page.locator("#api h3").all_inner_texts()
        assert {"POST /translate", "GET /health", "GET /model"} <= set(operations)
        assert errors == []
    assert (tmp_path / "serve-page.png").stat().st_size > 10_000


def test_a_warning_names_the_line_of_the_box(browser, serve_model: Path, test_lines: list[str], tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Blank lines between sentences count: the page dropped them, so "input line 2" meant the box's third line."""
    short, long = test_lines[1][:30], test_lines[2] * 3
    with running_server(serve_model, "--max-chars", "40", log=tmp_path / "serve.log") as (_, url):
        page = browser.new_page()
        page.goto(url + "/")
        page.fill("#source", f"{short}\n\n{long}\n\n")
        page.click("#translate")
        page.wait_for_selector(".result .translation", timeout=60_000)
        assert page.locator(".result").count() == 2  # the blank lines get no box
        assert page.locator(".result .source").all_inner_texts() == [short, long[:40]]
        assert page.inner_text("#warnings").startswith(f"warning: input line 3: {len(long):,} characters cut to 40")
