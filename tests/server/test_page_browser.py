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
    assert "No results. No indexed chunk matches the filter (size>1G)." in browser.find_element(By.ID, "hits").text
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
