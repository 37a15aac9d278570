"""The search page at `/` in a real headless browser (Debian's chromium + chromedriver, driven by selenium).

`make test` installs the browser when it is missing (tools/ensure_browser.sh); run directly without it, this
test is skipped with that instruction.
"""

from __future__ import annotations

import shutil

import pytest

from tests.server.conftest import ServerHandle

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="module")
def browser():
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("no chromium/chromedriver: run tools/ensure_browser.sh (make test does) to install them")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,900"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def test_search_page_end_to_end(served: ServerHandle, browser) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, 60)
    browser.get(served.url + "/")
    rerank = browser.find_element(By.ID, "rerank")
    wait.until(lambda d: d.find_element(By.ID, "collection").get_attribute("value") == "default")
    wait.until(lambda d: rerank.is_enabled() and rerank.is_selected())  # a reranker is configured

    # type a query: the expected file is on top, with span, heading and both scores
    box = browser.find_element(By.ID, "q")
    box.send_keys("how do I rotate the API keys?")
    browser.find_element(By.ID, "go").click()
    wait.until(lambda d: "reranked" in d.find_element(By.ID, "note").text)
    first = browser.find_elements(By.CSS_SELECTOR, ".hit")[0]
    assert first.find_element(By.CSS_SELECTOR, "a.path").text.endswith("docs/keys.md")
    meta = first.find_element(By.CSS_SELECTOR, ".meta").text
    assert "lines" in meta and "score" in meta and "rerank" in meta
    assert "vault rotate" in first.find_element(By.CSS_SELECTOR, ".passage").text

    # toggle rerank off: a new search without the rerank stage
    rerank.click()
    wait.until(lambda d: "disabled for this query" in d.find_element(By.ID, "note").text)
    first = browser.find_elements(By.CSS_SELECTOR, ".hit")[0]
    assert "rerank" not in first.find_element(By.CSS_SELECTOR, ".meta").text

    # a filter no chunk meets ("where" takes clauses: name=value words, like --meta, or size>1G): the empty
    # result names the filter that removed everything; then cleared
    where = browser.find_element(By.ID, "meta")
    where.send_keys("size>1G")
    browser.find_element(By.ID, "go").click()
    wait.until(lambda d: d.find_element(By.ID, "note").text.startswith("0 results"))
    shown = browser.find_element(By.ID, "hits").text
    assert "No results. No indexed chunk matches the filter: no chunk matches 'size>1G' on its own" in shown
    where.clear()
    browser.find_element(By.ID, "go").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".hit"))
    first = browser.find_elements(By.CSS_SELECTOR, ".hit")[0]

    # the link opens the file's text at the passage, highlighted
    first.find_element(By.CSS_SELECTOR, "a.path").click()
    wait.until(ec.visibility_of_element_located((By.ID, "viewer")))
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#viewer-text .hl"))
    highlighted = " ".join(e.text for e in browser.find_elements(By.CSS_SELECTOR, "#viewer-text .hl"))
    assert "vault rotate" in highlighted or "rotate" in highlighted.lower()
    assert browser.find_element(By.ID, "viewer-title").text.startswith(
        first.find_element(By.CSS_SELECTOR, "a.path").text
    )

    # an error is shown, not a blank page
    box.clear()
    browser.execute_script("document.getElementById('q').value = 'x'.repeat(5000)")
    browser.find_element(By.ID, "go").click()
    error = wait.until(ec.visibility_of_element_located((By.ID, "error")))
    assert "4096" in error.text
    assert browser.find_elements(By.CSS_SELECTOR, ".hit") == []


def test_the_api_docs_render_offline(served: ServerHandle, browser) -> None:
    """Swagger UI at /docs renders the schema with every asset from the server (requests elsewhere blocked)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.execute_cdp_cmd("Network.enable", {})
    browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["https://*", "*jsdelivr*", "*unpkg*", "*.com/*"]})
    try:
        browser.get(served.url + "/docs")
        WebDriverWait(browser, 60).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".opblock-summary-path"))
        paths = {e.text.replace("\u200b", "") for e in browser.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")}
    finally:
        browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
    assert "/search" in paths and "/v1/embeddings" in paths


def test_search_page_filters_marks_terms_and_shares_its_address(served: ServerHandle, browser) -> None:
    from urllib.parse import parse_qs, urlparse

    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, 60, ignored_exceptions=[StaleElementReferenceException])  # results re-render
    # an address with a query fills the form and runs the search (shareable)
    browser.get(served.url + "/?q=nightly+database+backups&type=md&mode=dense&rerank=0")
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".hit"))
    assert browser.find_element(By.ID, "q").get_attribute("value") == "nightly database backups"
    assert browser.find_element(By.ID, "mode").get_attribute("value") == "dense"
    assert not browser.find_element(By.ID, "rerank").is_selected()
    paths = [e.text for e in browser.find_elements(By.CSS_SELECTOR, ".hit a.path")]
    assert paths and all(p.endswith(".md") for p in paths), paths  # the type filter applied
    assert paths[0].endswith("backup.md")
    marks = {m.text.lower() for m in browser.find_elements(By.CSS_SELECTOR, ".hit .passage mark")}
    assert {"nightly", "backups", "database"} <= marks, marks

    # the form's filters: a path glob; the address follows the search
    box = browser.find_element(By.ID, "q")
    box.clear()
    box.send_keys("tomatoes")
    browser.find_element(By.ID, "types").clear()
    browser.find_element(By.ID, "path").send_keys("*.txt")
    browser.find_element(By.ID, "go").click()
    wait.until(lambda d: parse_qs(urlparse(d.current_url).query).get("q") == ["tomatoes"])
    wait.until(lambda d: (found := d.find_elements(By.CSS_SELECTOR, ".hit a.path"))
               and all(e.text.endswith(".txt") for e in found))
    assert parse_qs(urlparse(browser.current_url).query)["path"] == ["*.txt"]
    # a folder to search under (path_prefix)
    browser.find_element(By.ID, "path").clear()
    browser.find_element(By.ID, "under").send_keys(str(served.root / "docs"))
    browser.find_element(By.ID, "go").click()
    wait.until(lambda d: parse_qs(urlparse(d.current_url).query).get("under") == [str(served.root / "docs")])
    wait.until(lambda d: (found := d.find_elements(By.CSS_SELECTOR, ".hit a.path"))
               and all(e.text.startswith(str(served.root / "docs")) for e in found))
    browser.find_element(By.ID, "under").clear()
    assert "<script" not in browser.find_element(By.ID, "hits").get_attribute("innerHTML")

    # the file viewer opens every format of the corpus at its passage
    browser.get(served.url + "/?q=circle+area+radius+pasta+backup+keys&k=5&mode=dense&rerank=0")
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".hit")) == 5)
    kinds = set()
    for i in range(5):
        link = browser.find_elements(By.CSS_SELECTOR, ".hit a.path")[i]
        path = link.text
        link.click()
        wait.until(ec.visibility_of_element_located((By.ID, "viewer")))
        wait.until(lambda d, p=path: d.find_element(By.ID, "viewer-title").text.startswith(p))
        assert browser.find_elements(By.CSS_SELECTOR, "#viewer-text .hl"), path
        kinds.add(path.rsplit(".", 1)[-1])
    assert kinds == {"md", "txt", "py"}


# -- the page as a daily tool (issue 32): layout at 390 and 1280 px, keyboard, search-as-you-type, facets ---------
FETCH_LOG = """
window.__searches = [];
const original = window.fetch;
window.fetch = (url, opts) => {
  if (String(url).startsWith('/search')) {
    const call = { body: JSON.parse(opts.body), start: performance.now(), end: null, signal: opts.signal };
    window.__searches.push(call);
    const done = () => { call.end = performance.now(); };
    const p = original(url, opts);
    p.then(done, done);
    return p;
  }
  return original(url, opts);
};
"""


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory):
    """Where screenshots go (kept, not compared): $INDEXER_TEST_ARTIFACTS, else a pytest temporary folder."""
    import os
    from pathlib import Path

    folder = Path(os.environ.get("INDEXER_TEST_ARTIFACTS") or tmp_path_factory.mktemp("page-screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _viewport(browser, width: int, height: int) -> None:
    """The page's viewport at exactly this size (a phone's with mobile=True: the viewport meta tag applies)."""
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})
    browser.viewport_width = width  # checked by _load once a page with the viewport meta tag is shown


def _no_horizontal_scroll(browser) -> None:
    wide, inner = browser.execute_script(
        "return [document.documentElement.scrollWidth, window.innerWidth]")
    assert wide <= inner, f"the page scrolls sideways: scrollWidth {wide} > innerWidth {inner}"


def _load(browser, url: str):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(url)
    wait = WebDriverWait(browser, 60, ignored_exceptions=[StaleElementReferenceException])
    wait.until(lambda d: d.execute_script("return document.body.dataset.ready === '1'"))
    assert browser.execute_script("return window.innerWidth") == browser.viewport_width
    return wait


def _active_id(browser) -> str:
    return browser.execute_script(
        "const a = document.activeElement; return a ? (a.id || (a.closest('.hit') || {}).id || a.tagName) : ''")


def test_page_at_390px_overview_viewer_overlay_and_focus(served: ServerHandle, browser, artifacts) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    _viewport(browser, 390, 844)
    try:
        wait = _load(browser, served.url + "/")
        # the empty page: the collection at a glance, with example queries drawn from it
        overview = browser.find_element(By.ID, "overview")
        assert overview.is_displayed()
        text = overview.text
        assert "files\n5" in text and "chunks" in text and str(served.root) in text
        assert "last indexed" in text and "ago" in text and "not running" in text
        examples = browser.find_elements(By.CSS_SELECTOR, "#overview .chip.example")
        assert examples
        _no_horizontal_scroll(browser)
        browser.save_screenshot(str(artifacts / "390-overview.png"))
        # the search options fold away behind a labelled button; opened, they still fit the width
        toggle = browser.find_element(By.ID, "options-toggle")
        assert not browser.find_element(By.ID, "meta").is_displayed()
        toggle.click()
        assert browser.find_element(By.ID, "meta").is_displayed() and toggle.get_attribute("aria-expanded") == "true"
        _no_horizontal_scroll(browser)
        browser.save_screenshot(str(artifacts / "390-options.png"))
        toggle.click()

        # an example query runs a search; results fit the width
        examples[0].click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".hit")
                   and not d.find_element(By.ID, "overview").is_displayed())
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#facets .chip"))
        _no_horizontal_scroll(browser)
        browser.save_screenshot(str(artifacts / "390-results.png"))

        # the viewer is an overlay covering the viewport, a modal dialog with a close button and the focus
        link = browser.find_elements(By.CSS_SELECTOR, ".hit a.path")[0]
        link.send_keys(Keys.ENTER)
        viewer = browser.find_element(By.ID, "viewer")
        wait.until(lambda d: viewer.is_displayed() and d.find_elements(By.CSS_SELECTOR, "#viewer-text .hl"))
        rect = browser.execute_script(
            "const r = document.getElementById('viewer').getBoundingClientRect();"
            "return [r.left, r.top, r.width, r.height, window.innerWidth, window.innerHeight]")
        left, top, width, height, inner_w, inner_h = rect
        assert (left, top) == (0, 0) and width >= inner_w and height >= inner_h, rect
        assert viewer.get_attribute("role") == "dialog" and viewer.get_attribute("aria-modal") == "true"
        assert browser.find_element(By.ID, "viewer-close").is_displayed()
        assert _active_id(browser) == "viewer-close"
        # Tab and Shift+Tab keep the focus inside the dialog
        inside = "return document.getElementById('viewer').contains(document.activeElement)"
        for keys in (Keys.TAB, Keys.TAB, Keys.TAB, Keys.SHIFT + Keys.TAB, Keys.SHIFT + Keys.TAB):
            browser.switch_to.active_element.send_keys(keys)
            assert browser.execute_script(inside)
        _no_horizontal_scroll(browser)
        browser.save_screenshot(str(artifacts / "390-viewer.png"))

        # Escape closes it and gives the focus back to the hit that opened it
        browser.switch_to.active_element.send_keys(Keys.ESCAPE)
        wait.until(lambda d: not viewer.is_displayed())
        assert _active_id(browser) == "hit-0"
        # the close button does the same
        browser.find_elements(By.CSS_SELECTOR, ".hit a.path")[1].send_keys(Keys.ENTER)
        wait.until(lambda d: viewer.is_displayed())
        browser.find_element(By.ID, "viewer-close").click()
        wait.until(lambda d: not viewer.is_displayed())
        assert _active_id(browser) == "hit-1"
        # the narrowest width the page is made for
        _viewport(browser, 360, 740)
        for url in ("/", "/?q=circle+area+radius+pasta+backup+keys&rerank=0"):
            wait = _load(browser, served.url + url)
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".hit")
                       or d.find_element(By.ID, "overview").is_displayed())
            _no_horizontal_scroll(browser)
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_page_at_1280px_keyboard_two_columns_and_marks_in_the_viewer(served: ServerHandle, browser, artifacts) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    _viewport(browser, 1280, 900)
    try:
        wait = _load(browser, served.url + "/")
        browser.find_element(By.TAG_NAME, "body").click()
        assert _active_id(browser) != "q"
        # "/" focuses the search box (and is not typed into it)
        browser.switch_to.active_element.send_keys("/")
        assert _active_id(browser) == "q"
        box = browser.find_element(By.ID, "q")
        box.send_keys("rotate the API keys" + Keys.ENTER)
        wait.until(lambda d: "reranked" in d.find_element(By.ID, "note").text)
        assert box.get_attribute("value") == "rotate the API keys"
        hits = browser.find_elements(By.CSS_SELECTOR, ".hit")
        assert len(hits) >= 3
        # "/" typed inside the box is a character, not a shortcut
        # arrows move through the hits with a visible focus; ArrowUp from the first goes back to the box
        box.send_keys(Keys.ARROW_DOWN)
        assert _active_id(browser) == "hit-0"
        outline = browser.execute_script(
            "const h = document.activeElement.closest('.hit'); return getComputedStyle(h).outlineStyle + ' ' +"
            " getComputedStyle(document.activeElement).outlineStyle")
        assert outline.split() != ["none", "none"], outline
        browser.switch_to.active_element.send_keys(Keys.ARROW_DOWN)
        browser.switch_to.active_element.send_keys(Keys.ARROW_DOWN)
        assert _active_id(browser) == "hit-2"
        browser.switch_to.active_element.send_keys(Keys.ARROW_UP)
        assert _active_id(browser) == "hit-1"
        browser.switch_to.active_element.send_keys(Keys.ARROW_UP)
        browser.switch_to.active_element.send_keys(Keys.ARROW_UP)
        assert _active_id(browser) == "q"
        # Enter opens the focused hit in the viewer: two columns, the hit's words marked as in its snippet
        box.send_keys(Keys.ARROW_DOWN)
        first_path = browser.find_elements(By.CSS_SELECTOR, ".hit a.path")[0].text
        browser.switch_to.active_element.send_keys(Keys.ENTER)
        viewer = browser.find_element(By.ID, "viewer")
        wait.until(lambda d: viewer.is_displayed()
                   and d.find_element(By.ID, "viewer-title").text.startswith(first_path))
        results = browser.find_element(By.ID, "results").rect
        side = viewer.rect
        assert side["x"] >= results["x"] + results["width"] and side["width"] >= 400, (results, side)
        assert viewer.get_attribute("aria-modal") == "false"  # a side panel here, not a modal
        viewer_marks = [m.text.lower() for m in browser.find_elements(By.CSS_SELECTOR, "#viewer-text .hl mark")]
        hit_marks = {m.text.lower() for m in browser.find_elements(By.CSS_SELECTOR, "#hit-0 .passage mark")}
        assert viewer_marks and set(viewer_marks) == hit_marks, (viewer_marks, hit_marks)
        assert "the" not in viewer_marks
        # scrolled to the hit: its first mark is inside the viewer's visible box
        assert browser.execute_script(
            "const m = document.querySelector('#viewer-text .hl mark').getBoundingClientRect();"
            "const v = document.getElementById('viewer').getBoundingClientRect();"
            "return m.top >= v.top && m.bottom <= v.bottom")
        _no_horizontal_scroll(browser)
        browser.save_screenshot(str(artifacts / "1280-viewer.png"))
        # every control shown has a name (a label, aria-label or its text)
        unnamed = browser.execute_script(
            "return [...document.querySelectorAll('input, select, button, textarea')]"
            ".filter(n => n.getClientRects().length)"
            ".filter(n => !((n.getAttribute('aria-label') || '').trim() ||"
            " (n.labels && [...n.labels].some(l => l.textContent.trim())) || n.textContent.trim()))"
            ".map(n => n.id || n.outerHTML.slice(0, 80))")
        assert unnamed == [], unnamed
        browser.switch_to.active_element.send_keys(Keys.ESCAPE)
        wait.until(lambda d: not viewer.is_displayed())
        assert _active_id(browser) == "hit-0"
        # opened from another hit while open: the focus goes back to that one
        browser.find_elements(By.CSS_SELECTOR, ".hit a.path")[0].click()
        wait.until(lambda d: viewer.is_displayed())
        browser.find_elements(By.CSS_SELECTOR, ".hit a.path")[2].click()
        wait.until(lambda d: d.find_element(By.ID, "viewer-title").text.startswith(
            d.find_elements(By.CSS_SELECTOR, ".hit a.path")[2].text))
        browser.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)
        wait.until(lambda d: not viewer.is_displayed())
        assert _active_id(browser) == "hit-2"
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_search_as_you_type_debounces_cancels_and_reranks_on_pause(served: ServerHandle, browser, artifacts) -> None:
    import json
    import time as _time

    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    _viewport(browser, 1280, 900)
    try:
        wait = _load(browser, served.url + "/")
        browser.execute_script(FETCH_LOG + """
            window.__typed = null; window.__shown = null;
            document.getElementById('q').addEventListener('input', () => {
              window.__typed = performance.now(); window.__shown = null; });
            new MutationObserver(() => {
              if (window.__typed !== null && window.__shown === null) window.__shown = performance.now(); })
              .observe(document.getElementById('hits'), { childList: true });
            window.__full = null;
            new MutationObserver(() => {
              if (window.__full === null && document.getElementById('note').textContent.includes('reranked'))
                window.__full = performance.now(); })
              .observe(document.getElementById('note'), { childList: true, subtree: true, characterData: true });""")
        box = browser.find_element(By.ID, "q")
        query = "nightly database backup"[:20]
        assert len(query) == 20
        box.send_keys(query)  # 20 keystrokes, as fast as the driver types them
        wait.until(lambda d: d.execute_script("return window.__shown !== null"))
        first_results_ms = browser.execute_script("return window.__shown - window.__typed")
        _time.sleep(2.0)  # past the pause: the full search ran
        wait.until(lambda d: "reranked" in d.find_element(By.ID, "note").text)
        reranked_ms = browser.execute_script("return window.__full - window.__typed")
        calls = browser.execute_script(
            "return window.__searches.map(c => ({body: c.body, start: c.start, end: c.end,"
            " aborted: c.signal.aborted}))")
        assert 1 <= len(calls) <= 3, calls
        searches_for_20_keys = len(calls)
        assert all(c["body"]["query"] == query for c in calls), [c["body"]["query"] for c in calls]
        quick, full = calls[0]["body"], calls[-1]["body"]
        assert quick["rerank"] is False and "facets" not in quick  # while typing: no rerank
        assert full["rerank"] is True and full["facets"]  # typing paused: the full search
        assert first_results_ms >= 250  # the debounce
        assert browser.find_elements(By.CSS_SELECTOR, "#facets .chip")

        # keep typing while a search is in flight: the earlier one is cancelled, only the latest is shown
        browser.execute_script("window.__searches.length = 0")
        for word in (" on", " the", " NAS"):
            box.send_keys(word)
            _time.sleep(0.35)  # each pause lets a quick search start; the next keystroke starts another
        box.send_keys(Keys.ENTER)  # Enter: the full search at once
        wait.until(lambda d: "reranked" in d.find_element(By.ID, "note").text)
        _time.sleep(1.2)
        calls = browser.execute_script(
            "return window.__searches.map(c => ({q: c.body.query, rerank: c.body.rerank, start: c.start, end: c.end,"
            " aborted: c.signal.aborted}))")
        assert calls[-1]["q"] == query + " on the NAS" and calls[-1]["rerank"] is True
        # never two searches in flight: each ended or was cancelled before the next started
        for a, b in zip(calls, calls[1:], strict=False):
            assert a["aborted"] or (a["end"] is not None and a["end"] <= b["start"]), calls
        assert browser.find_element(By.ID, "q").get_attribute("value") in browser.current_url.replace("+", " ")
        (artifacts / "typing.json").write_text(json.dumps(
            {"first_results_ms_after_typing_stops": first_results_ms, "reranked_results_ms": reranked_ms,
             "requests_for_20_keystrokes": searches_for_20_keys}))
        print(f"\ntime to first results after typing stops: {first_results_ms:.0f} ms (reranked: {reranked_ms:.0f} "
              f"ms); searches for 20 keystrokes: {searches_for_20_keys}")
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_facet_chips_filter_and_active_filters_are_removable(served: ServerHandle, browser, artifacts) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    _viewport(browser, 1280, 900)
    try:
        wait = _load(browser, served.url + "/?q=tomatoes+pasta+backups+keys&rerank=0")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#facets .chip"))
        chips = {c.get_attribute("data-clause"): c for c in browser.find_elements(By.CSS_SELECTOR, "#facets .chip")}
        assert "type=txt" in chips and "type=md" in chips, list(chips)
        txt = chips["type=txt"]
        assert txt.text.split() == ["txt", "2"]  # the value and its count
        txt.click()
        wait.until(lambda d: (paths := [e.text for e in d.find_elements(By.CSS_SELECTOR, ".hit a.path")])
                   and all(p.endswith(".txt") for p in paths))
        assert browser.find_element(By.ID, "meta").get_attribute("value") == "type=txt"
        assert "where=type%3Dtxt" in browser.current_url
        active = browser.find_elements(By.CSS_SELECTOR, "#active .chip")
        assert [a.text for a in active] == ["type=txt ×"]
        browser.save_screenshot(str(artifacts / "1280-facets.png"))
        # a folder chip adds path^=<root>/<folder>
        folder = next(c for c in browser.find_elements(By.CSS_SELECTOR, "#facets .chip")
                      if c.get_attribute("data-clause").startswith("path^="))
        assert folder.get_attribute("data-clause") == "path^=" + str(served.root / "notes")
        # remove the active filter: everything again
        browser.find_element(By.CSS_SELECTOR, "#active .chip").click()
        wait.until(lambda d: any(not e.text.endswith(".txt") for e in d.find_elements(By.CSS_SELECTOR, ".hit a.path")))
        assert browser.find_element(By.ID, "meta").get_attribute("value") == ""
        # a folder chip filters by folder
        next(c for c in browser.find_elements(By.CSS_SELECTOR, "#facets .chip")
             if c.get_attribute("data-clause") == "path^=" + str(served.root / "docs")).click()
        wait.until(lambda d: (paths := [e.text for e in d.find_elements(By.CSS_SELECTOR, ".hit a.path")])
                   and all(p.startswith(str(served.root / "docs")) for p in paths))
        # clearing the box goes back to the overview
        box = browser.find_element(By.ID, "q")
        box.send_keys(Keys.CONTROL + "a", Keys.BACKSPACE)
        wait.until(lambda d: d.find_element(By.ID, "overview").is_displayed())
        assert browser.find_elements(By.CSS_SELECTOR, ".hit") == []
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_status_panel_is_readable(served: ServerHandle, browser, artifacts) -> None:
    import re

    from selenium.webdriver.common.by import By

    _viewport(browser, 390, 844)
    try:
        wait = _load(browser, served.url + "/")
        browser.find_element(By.ID, "status-toggle").click()
        panel = browser.find_element(By.ID, "status-panel")
        wait.until(lambda d: panel.is_displayed())
        text = panel.text
        assert "model" in text and "reranker" in text and "watcher" in text and "last indexed" in text
        assert re.search(r"last indexed\n\d+ (s|min) ago", text), text
        assert re.search(r"up \d+(\.\d)? (s|min|h)", text), text
        assert not re.search(r"-[0-9a-f]{12}\b", text), text  # model names, not fingerprints
        assert "not running" in text
        assert re.search(r"· weights (bf16|f16|f32|q8_0)", text), text  # the model's weight types
        assert re.search(r"chunks\n\d+ tokens each · context: none", text), text
        assert "pictures\nno (the model embeds text only)" in text
        assert browser.find_element(By.ID, "status-toggle").get_attribute("aria-expanded") == "true"
        _no_horizontal_scroll(browser)
        browser.save_screenshot(str(artifacts / "390-status.png"))
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_the_empty_page_of_a_server_without_collections_says_how_to_make_one(
    isolated_env, embed_model_path, browser
) -> None:
    from selenium.webdriver.common.by import By

    from tests.server.conftest import make_settings, start_server

    handle = start_server(make_settings(isolated_env / "no-collections", embed_model_path, None), isolated_env,
                          mcp=False)
    try:
        _viewport(browser, 1280, 900)
        _load(browser, handle.url + "/")
        box = browser.find_element(By.ID, "overview")
        assert box.is_displayed() and "Nothing to search yet" in box.text
        assert "indexer index PATH -c default" in box.text
        assert not browser.find_element(By.ID, "error").is_displayed()
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        handle.stop()


# -- the where box (issue 42): the filter language typed as a person does, on a folder with front matter ---------
@pytest.fixture(scope="module", params=["faiss", "qdrant"])
def front_matter_served(request, isolated_env, embed_model_path):
    """A server over the filter examples' folder (Markdown notes with YAML and TOML front matter, mails from
    "Name <addr>" and bare senders, CSVs), indexed for real into FAISS or embedded Qdrant; no reranker."""
    from indexer.collection.facade import open_collection
    from tests.integration.test_filter_examples import ALL, write_folder
    from tests.server.conftest import make_settings, start_server

    root = write_folder(isolated_env / f"front-matter-{request.param}").resolve()
    settings = make_settings(isolated_env / f"front-matter-data-{request.param}", embed_model_path, None,
                             store=request.param)
    with open_collection("default", settings=settings) as col:
        report = col.index([root])
    assert report.failed == [] and report.files_indexed == len(ALL), report.to_dict()
    handle = start_server(settings, root, watch=False)
    yield handle
    handle.stop()


def test_the_where_box_reads_not_in_and_quoted_values_and_refuses_hostile_ones(front_matter_served, browser) -> None:
    from pathlib import Path

    from selenium.webdriver.common.by import By

    from tests.integration.test_filter_examples import ALL, MAILS

    served = front_matter_served
    _viewport(browser, 1280, 900)
    try:
        # every chunk of the folder fits in k=30 (dense: min(k, matches) hits), so the files shown are the matches
        wait = _load(browser, served.url + "/?q=budget+notes+tomatoes+setup&k=30&mode=dense&rerank=0")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".hit"))
        unfiltered = {str(Path(e.text).relative_to(served.root))
                      for e in browser.find_elements(By.CSS_SELECTOR, ".hit a.path")}
        assert unfiltered == ALL
        box = browser.find_element(By.ID, "meta")

        def search(where: str, *, typed: bool = True) -> None:
            """Type ``where`` into the box (or set it, for what a keyboard cannot type) and press Search; waits
            for the answer (the hits or the error are cleared first, so a previous answer never passes)."""
            browser.execute_script("document.getElementById('hits').replaceChildren();"
                                   "document.getElementById('error').textContent = '';")
            if typed:
                box.clear()
                box.send_keys(where)
            else:
                browser.execute_script("document.getElementById('meta').value = arguments[0]", where)
            assert box.get_attribute("value") == where
            browser.find_element(By.ID, "go").click()
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#hits > *")
                       or d.find_element(By.ID, "error").text)

        def shown() -> set[str]:
            assert not browser.find_element(By.ID, "error").text
            return {str(Path(e.text).relative_to(served.root))
                    for e in browser.find_elements(By.CSS_SELECTOR, ".hit a.path")}

        def chips() -> list[str]:  # the clauses as the server read them (the answer's `where`)
            return [c.text.removesuffix(" ×") for c in browser.find_elements(By.CSS_SELECTOR, "#active .chip")]

        cases = [
            # `not`: one clause, not two chips and an error
            ("not type=md", MAILS | {"data/small.csv", "data/big.csv"}, ["not type=md"]),
            # `in` with a parenthesised list, and the comma-separated one: "contains any" on front matter tags
            ("tags in (garden, roses)", {"notes/garden.md"}, ["tags in (garden, roses)"]),
            ("sender in ada,linus", {"mail/ada.eml", "mail/linus.eml"}, ["sender in ada,linus"]),
            # a value with a space, quoted (spaces around the operator allowed); front matter's author
            ('author = "Ada Lovelace"', {"notes/garden.md"}, ['author = "Ada Lovelace"']),
            # a quoted value holding a comma inside an `in` list
            ('sender in "Lovelace, Ada",eve', {"mail/eve.eml"}, ['sender in "Lovelace, Ada",eve']),
            # several clauses in one text: split where a word opens a clause, a value's words kept together
            ('type=md not author="Ada Lovelace"', {"notes/weekly.md", "docs/setup.md"},
             ["type=md", 'not author="Ada Lovelace"']),
            ("title==Weekly notes not type=eml", {"notes/weekly.md"}, ["title==Weekly notes", "not type=eml"]),
            ("sender in ada,linus not type=csv date>=2025-01", {"mail/ada.eml", "mail/linus.eml"},
             ["sender in ada,linus", "not type=csv", "date>=2025-01"]),
            ("not author==ada lovelace; type=md", {"notes/weekly.md", "docs/setup.md"},
             ["not author==ada lovelace", "type=md"]),
        ]
        for where, files, read in cases:
            search(where)
            assert shown() == files, where
            assert chips() == read, where
            assert f"{len(browser.find_elements(By.CSS_SELECTOR, '.hit'))} results" in browser.find_element(
                By.ID, "note").text
            assert "where=" in browser.current_url  # shareable: reloading the address runs the same filter

        # a shared address with the filter fills the box and runs it again
        _load(browser, browser.current_url)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".hit"))
        box = browser.find_element(By.ID, "meta")
        assert box.get_attribute("value") == "not author==ada lovelace; type=md"
        assert shown() == {"notes/weekly.md", "docs/setup.md"}

        # a chip removes its clause only: the others still filter
        next(c for c in browser.find_elements(By.CSS_SELECTOR, "#active .chip") if c.text.startswith("type=md")).click()
        wait.until(lambda d: chips() == ["not author==ada lovelace"])
        wait.until(lambda d: shown() == ALL - {"notes/garden.md"})

        # an empty result names the clause that emptied it
        search("not type=pdf sender in ada,linus title==Weekly notes")
        assert browser.find_elements(By.CSS_SELECTOR, ".hit") == []
        assert chips() == ["not type=pdf", "sender in ada,linus", "title==Weekly notes"]
        assert browser.find_element(By.ID, "hits").text == (
            "No results. No indexed chunk matches the filter: no chunk matches 'title==Weekly notes' together "
            "with the clauses before it; `indexer fields` lists the fields and their commonest values")

        # hostile values: a clear message in the page's error box, no hits, never a server error or a blank page
        hostile = [
            ("size<99999999999999999999999G", True, "the size is out of range"),
            ("sendr=ada", True, "did you mean sender"),
            ("title>5", True, "title is a text field"),
            ("date=03", True, "date is a date field"),
            ("sender=a\x00b", False, "holds a control character"),
            ("sender=" + "x" * 20_000, False, "a filter clause has 20,007 characters"),
            ("sender=' OR 1=1 --", True, None),  # injection-shaped: read as a value, matches nothing
            ("<script>alert(1)</script>", True, "cannot read the filter clause"),
        ]
        for where, typed, message in hostile:
            search(where, typed=typed)
            error = browser.find_element(By.ID, "error")
            if message is None:
                assert not error.text and browser.find_elements(By.CSS_SELECTOR, ".hit") == []
                assert browser.find_element(By.ID, "hits").text.startswith("No results. No indexed chunk matches")
                continue
            assert error.is_displayed() and message in error.text, (where[:40], error.text)
            assert "500" not in error.text and "Internal" not in error.text and "pydantic" not in error.text
            assert browser.find_elements(By.CSS_SELECTOR, ".hit") == []
        assert "<script" not in browser.find_element(By.ID, "error").get_attribute("innerHTML")
        assert browser.execute_script("return document.querySelectorAll('script:not([src])').length") == 1

        # and the page still searches afterwards
        search("not type=md")
        wait.until(lambda d: shown() == MAILS | {"data/small.csv", "data/big.csv"})
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_every_text_example_of_the_docs_through_the_where_box(front_matter_served, browser) -> None:
    """search.md's and formats.md's filter examples (tests/integration/test_filter_examples.py), each typed into the
    where box as one text (several clauses joined by "; "): the same files, or the same refusal, as every other
    front end gives."""
    from pathlib import Path

    from selenium.webdriver.common.by import By

    from tests.integration.test_filter_examples import TEXT_EXAMPLES

    served = front_matter_served
    _viewport(browser, 1280, 900)
    try:
        wait = _load(browser, served.url + "/?q=budget+notes+tomatoes+setup&k=30&mode=dense&rerank=0")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".hit"))
        for where, want in TEXT_EXAMPLES:
            text = "; ".join(where)
            browser.execute_script("document.getElementById('hits').replaceChildren();"
                                   "document.getElementById('error').textContent = '';"
                                   "document.getElementById('meta').value = arguments[0];", text)
            browser.find_element(By.ID, "go").click()
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#hits > *") or d.find_element(By.ID, "error").text)
            error = browser.find_element(By.ID, "error").text
            paths = {str(Path(e.text).relative_to(served.root))
                     for e in browser.find_elements(By.CSS_SELECTOR, ".hit a.path")}
            if isinstance(want, set):
                assert not error and paths == want, (text[:60], error, paths)
            elif want.startswith("no chunk matches"):
                assert not error and not paths and want in browser.find_element(By.ID, "hits").text, text[:60]
            else:
                assert not paths and want in error, (text[:60], error)
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_the_page_marks_a_chinese_word_inside_a_sentence(served: ServerHandle, browser) -> None:
    """A word of an unspaced script (the Lexical terms issue): 预算 inside 项目预算 and a sentence is found by lexical
    search and marked, on the hit and in the viewer, from the analyzer's spans (JavaScript offsets agree)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    from indexer.collection.facade import open_collection

    root = served.root.parent / "scripts-corpus"
    (root / "zh").mkdir(parents=True, exist_ok=True)
    (root / "zh" / "budget.md").write_text("# 项目预算\n\n今年的项目预算已经由财务总监批准了。\n", "utf-8")
    (root / "zh" / "glacier.md").write_text("# 气候观测\n\n山上的冰川在夏天融化得很快。\n", "utf-8")
    with open_collection("scripts", settings=served.settings) as col:  # a second collection of the same server
        col.index([root])
    wait = WebDriverWait(browser, 60, ignored_exceptions=[StaleElementReferenceException])
    browser.get(served.url + "/?q=%E9%A2%84%E7%AE%97&collection=scripts&mode=lexical&rerank=0")  # q=预算
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".hit"))
    first = browser.find_elements(By.CSS_SELECTOR, ".hit")[0]
    assert first.find_element(By.CSS_SELECTOR, "a.path").text.endswith("zh/budget.md")
    marks = [m.text for m in first.find_elements(By.CSS_SELECTOR, ".passage mark")]
    assert marks and set(marks) == {"预算"}, marks
    first.find_element(By.CSS_SELECTOR, "a.path").click()
    wait.until(ec.visibility_of_element_located((By.ID, "viewer")))
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#viewer-text .hl mark"))
    viewer = {m.text for m in browser.find_elements(By.CSS_SELECTOR, "#viewer-text .hl mark")}
    assert viewer == {"预算"}, viewer
