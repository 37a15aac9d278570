"""How image hits are ranked beside text hits (our own rules, on plain values): fusion keeps an image point at its
dense rank (its file name may earn it a better one lexically, counted once), and the rerank stage never sends one
to the cross-encoder nor drops it; the image preparation shared by indexing and image queries; the data-URI
decoding of /search and /v1/embeddings."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from indexer.codec import data_uri, decode_data_uri, decode_request
from indexer.core.images import MAX_SIDE, ImageError, prepare_image, thumbnail
from indexer.errors import InputError
from indexer.search.fusion import FusionConfig, fuse
from indexer.search.rerank import rerank_stage
from indexer.types import Hit


def _hit(pid: str, score: float, image: bool = False) -> Hit:
    payload = {"path": f"/x/{pid}", "text": "" if image else f"text {pid}"}
    if image:
        payload |= {"media": "image", "width": 10, "height": 10}
    return Hit(pid, score, payload)


@pytest.mark.parametrize("method", ["score", "rrf", "dbsf"])
def test_an_image_hit_is_never_sunk_by_the_lexical_score_it_cannot_have(method):
    # the image is the best dense hit; a text chunk is second on the dense side and first on the lexical side
    dense = [_hit("img", 0.9, image=True), _hit("a", 0.8), _hit("b", 0.2)]
    lexical = [_hit("a", 12.0), _hit("b", 3.0)]
    fused = fuse(dense, lexical, FusionConfig.of(method))
    assert [h.id for h in fused] == ["img", "a", "b"]  # its dense rank, kept
    assert all(x.score >= y.score for x, y in zip(fused, fused[1:], strict=False))


def _dense_and_lexical():
    # "red circle": eight text chunks beat the picture on the dense side; its file name matches lexically
    dense = [_hit(f"t{i}", 0.9 - i * 0.05) for i in range(7)] + [_hit("img", 0.5, image=True), _hit("t7", 0.1)]
    lexical = [_hit("img", 9.0), *[_hit(f"t{i}", 8.0 - i) for i in range(0, 7, 2)]]
    return dense, lexical


@pytest.mark.parametrize("method", ["score", "rrf", "dbsf"])
def test_an_image_is_ranked_by_its_dense_score_unless_its_name_earns_a_place(method):
    dense, lexical = _dense_and_lexical()
    config = FusionConfig.of(method)
    without_name = fuse(dense, [h for h in lexical if h.id != "img"], config)
    assert [h.id for h in without_name].index("img") == 7  # 8th by dense, 8th in hybrid: never lifted above text
    named = fuse(dense, lexical, config)
    rank = [h.id for h in named].index("img")
    assert rank <= 7  # its name may earn it a place, counted once ...
    texts = {h.id: h.score for h in fuse([_hit(h.id, h.score) for h in dense], lexical, config)}
    assert {h.id: h.score for h in named}["img"] == pytest.approx(texts["img"])  # ... as for a text chunk
    for fused in (without_name, named):
        assert all(x.score >= y.score for x, y in zip(fused, fused[1:], strict=False))
        if method == "score":
            assert max(h.score for h in fused) <= 1.0 + 1e-9
        if method == "rrf":
            assert max(h.score for h in fused) <= 1.0 / 61 + 1e-12


def test_the_red_circle_case_no_longer_ranks_first_with_a_score_above_one():
    # as reported: an image 8th of 9 by dense was 1st in hybrid with 1.010 (its dense value at full weight on
    # both lists, plus its lexical value at full weight)
    dense, lexical = _dense_and_lexical()
    fused = fuse(dense, lexical, FusionConfig.of("score"))
    top = fused[0]
    assert top.score <= 1.0
    img = next(h for h in fused if h.id == "img")
    assert img.score == pytest.approx(0.4 * (0.5 - 0.1) / (0.9 - 0.1) + 0.6 * 1.0)


class _Reranker:
    model_id = "fake-reranker"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def rerank(self, query: str, texts: list[str]) -> list[float]:
        self.seen += texts
        return [float(t.split()[-1] == "c") for t in texts]  # "text c" is the best text


def test_the_rerank_stage_keeps_image_hits_in_their_dense_places_and_never_sends_them():
    texts = ["text a", "", "text b", "text c", ""]
    pictures = [False, True, False, False, True]
    reranker = _Reranker()
    stage = rerank_stage("q", texts, reranker, k=5, wanted=None, configured=True, pictures=pictures)
    assert reranker.seen == ["text a", "text b", "text c"]  # no image reaches the cross-encoder
    assert stage.ran and stage.order == (3, 1, 0, 2, 4)  # images at places 1 and 4; texts reranked around them
    assert stage.scores[1] is None and stage.scores[4] is None and stage.scores[0] == 1.0
    assert "image hit(s) kept" in stage.note
    top2 = rerank_stage("q", texts, _Reranker(), k=2, wanted=None, configured=True, pictures=pictures)
    assert top2.order == (3, 1)


def test_without_a_reranker_image_hits_keep_the_retrieval_order():
    stage = rerank_stage("q", ["", "text a"], None, k=2, wanted=None, configured=False, pictures=[True, False])
    assert not stage.ran and stage.order == (0, 1)


def _png(size: tuple[int, int], color: tuple[int, int, int] = (200, 10, 10), fmt: str = "PNG", **kw) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, fmt, **kw)
    return out.getvalue()


def test_prepared_images_are_the_same_bytes_for_the_same_input_and_downscaled():
    big = _png((3000, 1000))
    one, two = prepare_image(big), prepare_image(big)
    assert one.data == two.data and (one.width, one.height) == (MAX_SIDE, 341)
    assert (one.original_width, one.original_height, one.format) == (3000, 1000, "png")


def test_exif_orientation_is_applied_and_reported_as_shown():
    exif = Image.Exif()
    exif[0x0112] = 6
    turned = prepare_image(_png((40, 20), fmt="JPEG", exif=exif.tobytes()))
    assert (turned.width, turned.height) == (20, 40) == (turned.original_width, turned.original_height)


def test_an_image_over_the_pixel_cap_is_refused_before_decoding_and_garbage_is_named():
    with pytest.raises(ImageError, match="exceeds the cap") as exc:
        prepare_image(_png((200, 200)), max_pixels=100)
    assert exc.value.code == "too_large"
    with pytest.raises(ImageError, match="cannot decode"):
        prepare_image(b"GIF89a but not really")
    with Image.open(io.BytesIO(thumbnail(_png((800, 400)), 64))) as im:
        assert im.size == (64, 32) and im.format == "JPEG"


def test_data_uris_decode_with_clear_errors():
    png = _png((4, 4))
    assert decode_data_uri(data_uri(png)) == png
    assert data_uri(png).startswith("data:image/png;base64,")
    for bad, words in (("data:image/png,xyz", "base64 encoded"), ("data:text/html;base64,aGk=", "image/png"),
                       ("data:image/png;base64,%%%", "not valid base64"), ("image.png", "data URI")):
        with pytest.raises(InputError, match=words):
            decode_data_uri(bad)
    with pytest.raises(InputError, match="larger than"):
        decode_data_uri("data:image/png;base64," + base64.b64encode(b"x" * 100).decode(), limit=10)


def test_a_search_body_takes_an_image_as_a_data_uri_or_an_absolute_path_never_a_url():
    png = _png((4, 4))
    assert decode_request({"image": data_uri(png)}).image == png
    assert decode_request({"image": "/pics/a.png"}).image == "/pics/a.png"
    with pytest.raises(InputError, match="never fetches"):
        decode_request({"image": "http://example.org/a.png"})
    with pytest.raises(InputError, match="relative"):
        decode_request({"image": "a.png"})
