"""How image hits are ranked beside text hits (our own rules, on plain values): fusion scores an image point on its
dense side alone at full weight, and the rerank stage never sends one to the cross-encoder nor drops it; the
image preparation shared by indexing and image queries; the data-URI decoding of /search and /v1/embeddings."""

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
    config = FusionConfig.of(method)
    fused = {h.id: h.score for h in fuse(dense, lexical, config)}
    # as if the lexical side had ranked the image where the dense side did (its dense value counted twice)
    plain_dense = [_hit("img", 0.9), _hit("a", 0.8), _hit("b", 0.2)]
    solo = fuse(plain_dense, plain_dense, config)
    assert fused["img"] == pytest.approx({h.id: h.score for h in solo}["img"])
    if method != "score":  # score: a text chunk first on both sides still wins (1.0 both halves)
        assert max(fused, key=fused.__getitem__) == "img"
    # without the rule, the image would get only the dense weight's share
    plain = fuse(plain_dense, lexical, config)
    assert fused["img"] > {h.id: h.score for h in plain}["img"]


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
