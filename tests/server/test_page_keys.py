"""The search page against a server with API keys, in a real headless browser (docs/server.md, Security: "The page
asks for a key when the server answers 401 and keeps it in the browser's local storage"; a claim of the issue-41
claims table that had code and no test)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.conftest import ServerHandle, index_corpus, make_settings, start_server, write_corpus
from tests.server.test_page_browser import browser  # noqa: F401  (the headless Chromium fixture)

pytestmark = pytest.mark.slow

READ_KEY = "page-read-key-789"


@pytest.fixture(scope="module")
def keyed(isolated_env: Path, embed_model_path: Path) -> Iterator[ServerHandle]:
    root = write_corpus(isolated_env / "keyed-corpus").resolve()
    settings = make_settings(isolated_env / "keyed-data", embed_model_path, None, api_keys=(READ_KEY,))
    index_corpus(settings, root)
    handle = start_server(settings, root, mcp=False)
    yield handle
    handle.stop()


def test_the_page_asks_for_a_key_on_401_and_keeps_it_in_local_storage(keyed: ServerHandle, browser) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, 60)
    browser.get(keyed.url + "/")
    browser.execute_script("localStorage.removeItem('indexer.apikey')")
    browser.get(keyed.url + "/")
    keybox = browser.find_element(By.ID, "keybox")
    box = browser.find_element(By.ID, "q")
    box.send_keys("how do I rotate the API keys?")
    browser.find_element(By.ID, "go").click()
    wait.until(lambda d: keybox.is_displayed())  # the server answered 401: the page asks for the key
    assert browser.find_elements(By.CSS_SELECTOR, ".hit") == []

    key = browser.find_element(By.ID, "apikey")
    key.send_keys(READ_KEY)
    box.click()  # the key field loses focus: its change is stored, what the 401s hid is read again, and the
    # typed query is searched again (rerank as this server has it: none here, so the box is off)
    wait.until(lambda d: d.execute_script("return localStorage.getItem('indexer.apikey')") == READ_KEY)
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".hit"))
    assert not browser.find_element(By.ID, "rerank").is_selected()
    first = browser.find_elements(By.CSS_SELECTOR, ".hit")[0]
    assert first.find_element(By.CSS_SELECTOR, "a.path").text.endswith("docs/keys.md")

    # a reload (a new visit) keeps the key: the search answers without asking again
    browser.get(keyed.url + "/?q=rotate+the+API+keys")
    assert browser.find_element(By.ID, "apikey").get_attribute("value") == READ_KEY
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".hit"))
    assert not browser.find_element(By.ID, "keybox").is_displayed()
    browser.execute_script("localStorage.removeItem('indexer.apikey')")
