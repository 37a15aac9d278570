"""Image hits on the search page, in a real headless browser (issue 41): a folder of pictures and notes indexed
with the tiny Qwen3-VL fixture (tests/vision.py: real GGUF model + projector, run by llama.cpp) and served on
loopback. An image hit's meta line names its pixel size (as the CLI does), not "lines 1-1"; opening it shows the
picture (the largest `/thumbnail`) in the viewer, not one empty numbered line; a text hit opened after it shows its
lines again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from tests import vision
from tests.integration.test_images_in_folders import make_folder
from tests.server.conftest import ServerHandle, start_server
from tests.server.test_page_browser import browser  # noqa: F401  (the headless Chromium fixture)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pictures_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerHandle, list[Path]]]:
    from indexer.collection.facade import open_collection
    from indexer.settings import Settings

    model, _projector = vision.build(tmp_path_factory.mktemp("vl"), "f16")
    root = tmp_path_factory.mktemp("page-pictures").resolve()
    images = make_folder(root, 4)
    # OCR off: with Tesseract installed a photo's OCR'd words would be a second (text) hit of the same file
    settings = Settings(data_dir=tmp_path_factory.mktemp("page-pictures-data"), embed_model=str(model), threads=2,
                        reader_options={"image": {"ocr": False}})
    with open_collection("default", settings=settings) as col:
        report = col.index([root])
    assert report.failed == [] and report.files_indexed == 8, report.to_dict()
    handle = start_server(settings, root)
    yield handle, images
    handle.stop()


def _hits(driver: Any) -> list[tuple[str, str, Any]]:
    from selenium.webdriver.common.by import By

    return [(h.find_element(By.CSS_SELECTOR, "a.path").text, h.find_element(By.CSS_SELECTOR, ".meta").text, h)
            for h in driver.find_elements(By.CSS_SELECTOR, ".hit")]


def test_an_image_hit_names_its_size_and_opens_as_the_picture(pictures_served, browser) -> None:  # noqa: F811
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    served, images = pictures_served
    wait = WebDriverWait(browser, 60, ignored_exceptions=[StaleElementReferenceException])
    browser.get(served.url + "/?q=the+meeting+about+a+topic&mode=dense&k=10")
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".hit")) == 8)  # 4 pictures, 4 notes
    hits = _hits(browser)
    pictures = {path: (meta, node) for path, meta, node in hits if path in {str(p) for p in images}}
    assert len(pictures) == 4, [h[:2] for h in hits]
    for path, (meta, _node) in pictures.items():
        with Image.open(path) as im:
            shown = (im.height, im.width) if im.getexif().get(0x0112) in (5, 6, 7, 8) else im.size  # EXIF rotation
        assert meta.startswith(f"image {shown[0]} x {shown[1]} px · score "), (path, meta)
        assert "lines" not in meta
    assert all(meta.startswith("lines 1–1") for path, meta, _ in hits if path.endswith(".txt"))

    # the picture in the viewer: the largest thumbnail, loaded (a real decoded image), no text lines
    path, (meta, node) = next(iter(sorted(pictures.items())))
    node.find_element(By.CSS_SELECTOR, "a.path").click()
    wait.until(ec.visibility_of_element_located((By.ID, "viewer")))
    picture = wait.until(ec.visibility_of_element_located((By.ID, "viewer-picture")))
    wait.until(lambda d: d.execute_script("const i = arguments[0]; return i.complete && i.naturalWidth > 0", picture))
    assert not browser.find_element(By.ID, "viewer-text").is_displayed()
    assert browser.find_elements(By.CSS_SELECTOR, "#viewer-text .line") == []
    size = meta.split(" · ")[0].removeprefix("image ")  # "W x H px"
    assert browser.find_element(By.ID, "viewer-title").text == f"{path} ({size})"
    natural = browser.execute_script("return [arguments[0].naturalWidth, arguments[0].naturalHeight]", picture)
    w, h = (int(x) for x in size.removesuffix(" px").split(" x "))
    assert max(natural) == min(512, max(w, h)) and (natural[0] >= natural[1]) == (w >= h), (natural, size)

    # a text hit opened next shows its lines again, the picture hidden
    note = next(n for p, _m, n in _hits(browser) if p.endswith(".txt"))
    note.find_element(By.CSS_SELECTOR, "a.path").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#viewer-text .line"))
    assert browser.find_element(By.ID, "viewer-text").is_displayed()
    assert not browser.find_element(By.ID, "viewer-picture").is_displayed()
    assert "meeting about topic" in browser.find_element(By.ID, "viewer-text").text

    # the status panel says the collection embeds pictures, with the model's weight type and the chunking
    browser.find_element(By.ID, "viewer-close").click()
    browser.find_element(By.ID, "status-toggle").click()
    panel = wait.until(ec.visibility_of_element_located((By.ID, "status-panel")))
    assert "pictures\nyes, 4 image points" in panel.text, panel.text
    assert "· weights f16" in panel.text and "chunks\n512 tokens each · context: none" in panel.text, panel.text
