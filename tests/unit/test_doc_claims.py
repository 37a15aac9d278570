"""Claims of README.md and docs/ that had code doing them but no test holding them (the claims table of issue 41,
notes/issue-41-claims.md): the documented defaults, the image query's refusals, the query length cap, the
internal error's one line, and the tests the docs name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer

from indexer.errors import InputError
from indexer.search.query import QueryLimits, prepare
from indexer.settings import Settings
from indexer.types import MAX_QUERY_CHARS, SearchRequest

ROOT = Path(__file__).resolve().parents[2]
MiB = 1024 * 1024

# (doc, the words the doc says, the setting, its default): each default a doc states is the one Settings has.
DEFAULTS = [
    ("README.md", "`rerank_budget_ms`, default 1000", "rerank_budget_ms", 1000),
    ("docs/search.md", "`chunk_overlap` (32)", "chunk_overlap", 32),
    ("docs/search.md", 'so the default stays `"none"`', "chunk_context", "none"),
    ("docs/search.md", "Settings: `search_mode` (`hybrid`)", "search_mode", "hybrid"),
    ("docs/search.md", "`fusion` (`score`)", "fusion", "score"),
    ("docs/formats.md", "| `max_file_size` | 10 MiB |", "max_file_size", 10 * MiB),
    ("docs/formats.md", "| `max_image_file_size` | 64 MiB |", "max_image_file_size", 64 * MiB),
    ("docs/formats.md", "| `max_unpacked_bytes` | 500 MiB |", "max_unpacked_bytes", 500 * MiB),
    ("docs/formats.md", "| `max_unpack_ratio` | 50 |", "max_unpack_ratio", 50),
    ("docs/formats.md", "| `parse_timeout` | 60 s |", "parse_timeout", 60),
    ("docs/formats.md", "| `parse_memory_mb` | 2048 |", "parse_memory_mb", 2048),
    ("docs/formats.md", "| `parse_workers` | 2 |", "parse_workers", 2),
    ("docs/indexing.md", "`embed_batch_chunks` chunks (256)", "embed_batch_chunks", 256),
    ("docs/watch.md", "| `watch_rescan_seconds` | 600 |", "watch_rescan_seconds", 600),
    ("docs/watch.md", "| `watch_polling` | false |", "watch_polling", False),
    ("docs/watch.md", "| `watch_poll_seconds` | 1.0 |", "watch_poll_seconds", 1.0),
    ("docs/watch.md", "| `watch_discover_seconds` | 5.0 |", "watch_discover_seconds", 5.0),
    ("docs/server.md", "`max_queue` jobs (default 32)", "max_queue", 32),
    ("docs/server.md", "`queue_timeout` (30 s)", "queue_timeout", 30),
    ("docs/server.md", "`max_inputs` texts per\n  `/v1` call (256)", "max_inputs", 256),
    ("docs/server.md", "`max_request_tokens` per `/v1/embeddings` call (65,536)", "max_request_tokens", 65536),
    ("docs/server.md", "request body `max_body_bytes` (1 MiB", "max_body_bytes", MiB),
    ("docs/server.md", "`max_image_body_bytes` (32 MiB", "max_image_body_bytes", 32 * MiB),
    ("docs/server.md", "CORS is off unless `cors_origins` lists origins", "cors_origins", ()),
    ("docs/server.md", "only with\n  `trust_forwarded_host = true`", "trust_forwarded_host", False),
]


@pytest.mark.parametrize(("doc", "said", "name", "value"), DEFAULTS, ids=[d[2] for d in DEFAULTS])
def test_every_default_a_doc_states_is_the_settings_default(doc, said, name, value):
    assert said in (ROOT / doc).read_text(), f"{doc} no longer says {said!r}: update this table"
    assert Settings.model_fields[name].default == value, (doc, name)


def test_every_test_a_doc_names_exists():
    """A doc that cites `test_...` as the test holding a claim cites a test that is there."""
    defined = set()
    for path in (ROOT / "tests").rglob("*.py"):
        defined.update(re.findall(r"^\s*(?:async )?def (test_\w+)", path.read_text(), flags=re.M))
    modules = {p.stem for p in (ROOT / "tests").rglob("test_*.py")}
    missing = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for name in set(re.findall(r"`(test_\w+)`", doc.read_text())):
            if name not in defined and name not in modules and not name.endswith("_"):
                missing.append((doc.name, name))
        for path in set(re.findall(r"`(tests/[\w/]+\.py)", doc.read_text())):
            if not (ROOT / path).is_file():
                missing.append((doc.name, path))
    assert not missing


def test_an_image_query_is_dense_never_reranked_never_beside_words():
    """docs/search.md#pictures: mode `lexical` is refused, `rerank=true` is refused, `query` and `image` together
    are refused; otherwise the search runs dense without rerank."""
    limits = QueryLimits()
    image = b"\x89PNG\r\n\x1a\n..."  # prepare() checks the request; the collection decodes the picture
    with pytest.raises(InputError, match="cannot be reranked"):
        prepare(SearchRequest("", image=image, rerank=True), limits)
    with pytest.raises(InputError, match="lexical"):
        prepare(SearchRequest("", image=image, mode="lexical"), limits)
    with pytest.raises(InputError, match="not both"):
        prepare(SearchRequest("red circle", image=image), limits)
    ready = prepare(SearchRequest("", image=image, mode="hybrid"), limits)
    assert (ready.mode, ready.rerank) == ("dense", False)


def test_a_query_over_4096_characters_is_refused_and_one_of_4096_is_searched():
    """docs/search.md: a query over 4,096 characters is refused with a clear error."""
    assert MAX_QUERY_CHARS == 4096
    assert prepare(SearchRequest("a" * 4096), QueryLimits()).query == "a" * 4096
    with pytest.raises(InputError, match="4096"):
        prepare(SearchRequest("a" * 4097), QueryLimits())


def test_an_internal_error_is_one_line_and_shows_its_traceback_only_with_v(monkeypatch, capfd):
    """README: an unexpected internal error prints its traceback only with `-v` (exit 1, one line otherwise)."""
    from indexer.cli import main as cli_main

    app = typer.Typer()

    @app.command()
    def boom() -> None:
        raise RuntimeError("kaboom")

    @app.command()
    def other() -> None:  # two commands: typer keeps the subcommand's name
        pass

    monkeypatch.setattr(cli_main, "cli_command", lambda: typer.main.get_command(app))
    monkeypatch.setitem(cli_main._STATE, "verbose", False)
    assert cli_main._run(["boom"]) == 1
    quiet = capfd.readouterr().err
    assert "internal error: RuntimeError: kaboom" in quiet and "rerun with -v" in quiet
    assert "Traceback" not in quiet and len(quiet.strip().splitlines()) == 1
    monkeypatch.setitem(cli_main._STATE, "verbose", True)
    assert cli_main._run(["boom"]) == 1
    loud = capfd.readouterr().err
    assert "Traceback" in loud and "kaboom" in loud


def test_plugins_md_names_every_registered_reader():
    """docs/plugins.md's table lists the `indexer.readers` names pyproject.toml registers (it had lost `image`)."""
    section = (ROOT / "pyproject.toml").read_text().split('[project.entry-points."indexer.readers"]')[1].split("[")[0]
    names = re.findall(r"^(\w+) = ", section, flags=re.M)
    row = next(line for line in (ROOT / "docs/plugins.md").read_text().splitlines()
               if line.startswith("| `indexer.readers`"))
    listed = re.findall(r"`(\w+)`", row.split("|")[2])
    assert listed == names


def test_outlook_msg_is_claimed_by_no_reader():
    """docs/formats.md: Outlook `.msg` is not read (save such mail as .eml)."""
    from indexer.core import registry

    readers = registry.load_readers()
    assert ".eml" in {ext for r in readers for ext in r.extensions}
    assert ".msg" not in {ext for r in readers for ext in r.extensions}


def _frames(colors: list[tuple[int, int, int]], fmt: str) -> bytes:
    import io

    from PIL import Image

    out = io.BytesIO()
    frames = [Image.new("RGB", (40, 30), c) for c in colors]
    frames[0].save(out, fmt, save_all=True, append_images=frames[1:], duration=100, loop=0)
    return out.getvalue()


@pytest.mark.parametrize("fmt", ["GIF", "WEBP"])
def test_an_animated_picture_is_prepared_from_its_first_frame(fmt):
    """docs/formats.md and plugins.md: GIF (first frame) and WebP; prepare_image takes the first frame."""
    import io

    from PIL import Image

    from indexer.core.images import prepare_image

    red_first = prepare_image(_frames([(220, 0, 0), (0, 0, 220), (0, 220, 0)], fmt))
    blue_first = prepare_image(_frames([(0, 0, 220), (220, 0, 0), (0, 220, 0)], fmt))
    with Image.open(io.BytesIO(red_first.data)) as a, Image.open(io.BytesIO(blue_first.data)) as b:
        r, _, bl = a.convert("RGB").getpixel((20, 15))
        assert r > 150 and bl < 80, (r, bl)
        r, _, bl = b.convert("RGB").getpixel((20, 15))
        assert bl > 150 and r < 80, (r, bl)
    assert (red_first.width, red_first.height) == (40, 30)


def test_a_large_jpeg_is_decoded_at_a_reduced_scale(monkeypatch):
    """docs/formats.md: a large JPEG is decoded at a reduced scale (DCT scaling to the 1,024-pixel side), never
    whole, and reports the pixel size it has."""
    import io

    from PIL import Image, JpegImagePlugin

    from indexer.core.images import MAX_SIDE, prepare_image

    out = io.BytesIO()
    Image.new("RGB", (4000, 3000), (10, 200, 30)).save(out, "JPEG", quality=80)
    asked = []
    draft = JpegImagePlugin.JpegImageFile.draft

    def spy(self, mode, size):
        asked.append(size)
        return draft(self, mode, size)

    monkeypatch.setattr(JpegImagePlugin.JpegImageFile, "draft", spy)
    prepared = prepare_image(out.getvalue())
    assert asked == [(MAX_SIDE, MAX_SIDE)]
    assert (prepared.width, prepared.height) == (MAX_SIDE, 768)
    assert (prepared.original_width, prepared.original_height) == (4000, 3000)


def test_hybrid_fetches_twice_the_candidates_from_each_side_at_least_50_with_the_documented_weights():
    """docs/search.md#fusion: `hybrid` fetches `max(2 x candidates, 50)` chunks from each side; `w` is 0.4 for
    `score` and `rrf`, 0.5 for `dbsf` when unset, and a set weight wins."""
    from indexer.search.fusion import FusionConfig, depth

    score = FusionConfig.of("score")
    assert [depth(c, score) for c in (1, 25, 26, 50, 200)] == [50, 50, 52, 100, 400]
    assert (FusionConfig.of("score").dense_weight, FusionConfig.of("rrf").dense_weight) == (0.4, 0.4)
    assert FusionConfig.of("dbsf").dense_weight == 0.5 and FusionConfig.of("dbsf", 0.3).dense_weight == 0.3


def test_a_watcher_that_cannot_start_is_listed_once_and_tried_again_by_the_discovery(monkeypatch, caplog):
    """docs/server.md: a watcher that cannot start (another `indexer watch` holds that collection) is logged once
    and listed in `/status` `last_errors`; the server serves on, and the discovery tries again at its next round."""
    from concurrent.futures import ThreadPoolExecutor
    from types import SimpleNamespace

    import indexer.watch.watcher as watcher_module
    from indexer.errors import LockedError
    from indexer.server import service as service_module
    from indexer.server import watchers

    held = {"by_another": True}

    class Watcher:
        roots = ("/notes",)

        def __init__(self, writer: object) -> None:
            self.writer = writer

        def start(self) -> None:
            if held["by_another"]:
                raise LockedError("a watcher of collection 'notes' already runs (pid 4242)")

    monkeypatch.setattr(watcher_module, "Watcher", Watcher)
    monkeypatch.setattr(watchers, "list_collections", lambda settings: [SimpleNamespace(name="notes")])
    pool = ThreadPoolExecutor(max_workers=1)
    svc = SimpleNamespace(_index_pool=pool, writer=lambda name: f"writer of {name}", watchers={}, last_errors=[],
                          settings=SimpleNamespace(watch_discover_seconds=5.0))
    svc.record_error = lambda where, exc: service_module.Service.record_error(svc, where, exc)
    discovery = watchers._Discovery(svc, 5.0)
    try:
        with caplog.at_level("WARNING", logger="indexer.server.watchers"):
            discovery.start_new()
            discovery.start_new()  # the next round: the same failure, not logged nor listed again
        assert svc.watchers == {}
        assert [(e["where"], e["type"]) for e in svc.last_errors] == [("watch notes", "LockedError")]
        assert len([r for r in caplog.records if "not watched" in r.getMessage()]) == 1
        held["by_another"] = False  # the other watcher stopped: the next round starts ours
        discovery.start_new()
        assert list(svc.watchers) == ["notes"] and svc.watchers["notes"].writer == "writer of notes"
    finally:
        pool.shutdown()


def test_a_tiff_becomes_one_picture_from_its_first_frame_and_tiff_and_bmp_data_uris_are_taken():
    """README, docs/formats.md: with a multimodal model a TIFF is one image point too (its first frame), beside
    its OCR pages; docs/server.md: `/v1/embeddings` and `/search` take PNG, JPEG, GIF, WebP, TIFF and BMP data
    URIs."""
    import base64
    import io

    from PIL import Image

    from indexer.codec import decode_data_uri
    from indexer.types import SourceRef
    from plugins.filesystem.ocr import ImageReader

    tiff = _frames([(220, 0, 0), (0, 0, 220)], "TIFF")
    reader = ImageReader().with_options({"media": True, "max_unpacked_bytes": 1, "max_unpack_ratio": 1.0,
                                         "ocr": False})
    assert {".tif", ".tiff"} <= set(reader.extensions)
    doc = reader.read(SourceRef("/r", "/r/scan.tiff", len(tiff), 1), tiff)
    assert [(m.kind, m.width, m.height, m.format) for m in doc.media] == [("image", 40, 30, "tiff")]
    with Image.open(io.BytesIO(doc.media[0].data)) as im:
        r, _, b = im.convert("RGB").getpixel((20, 15))
        assert r > 150 and b < 80
    bmp = io.BytesIO()
    Image.new("RGB", (8, 8), (1, 2, 3)).save(bmp, "BMP")
    for fmt, data in (("tiff", tiff), ("bmp", bmp.getvalue())):
        assert decode_data_uri(f"data:image/{fmt};base64,{base64.b64encode(data).decode()}") == data


def test_a_faiss_query_runs_on_one_openmp_thread_and_the_process_setting_is_restored(tmp_path, monkeypatch):
    """docs/stores.md: one query uses one OpenMP thread (the process-wide setting is left as it was)."""
    import uuid

    import faiss
    import numpy as np

    from indexer.core.normalization import Normalization, normalize
    from indexer.types import Point
    from plugins.faiss import FaissStore
    from plugins.faiss.index import VectorIndex

    rng = np.random.default_rng(0)
    vectors = normalize(rng.normal(size=(20, 8)), Normalization.L2)
    store = FaissStore(tmp_path)
    store.ensure_collection("c", 8, {})
    store.upsert("c", [Point(str(uuid.uuid4()), v, {"path": f"/d/{i}.md", "file_type": "md"})
                       for i, v in enumerate(vectors)])
    seen = []
    search = VectorIndex.search

    def spy(self, *args, **kwargs):
        seen.append(faiss.omp_get_max_threads())
        return search(self, *args, **kwargs)

    monkeypatch.setattr(VectorIndex, "search", spy)
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(max(2, before))
    try:
        outside = faiss.omp_get_max_threads()
        assert len(store.search("c", vectors[0], 5)) == 5
        assert seen and set(seen) == {1}
        assert faiss.omp_get_max_threads() == outside
    finally:
        faiss.omp_set_num_threads(before)
        store.close()


def test_sqlite_waits_30_s_on_a_busy_state_database_and_60_s_on_a_busy_faiss_sidecar(tmp_path):
    """docs/indexing.md: SQLite "database is locked" is waited for by SQLite's busy timeout (30 s for the state
    database, 60 s for the FAISS sidecar) before it reaches the user."""
    from indexer.state.database import StateStore
    from plugins.faiss.sidecar import Sidecar

    state = StateStore(tmp_path / "state.sqlite")
    sidecar = Sidecar(tmp_path / "points.sqlite")
    try:
        assert state._db.execute("PRAGMA busy_timeout").fetchone()[0] == 30_000
        assert sidecar.conn.execute("PRAGMA busy_timeout").fetchone()[0] == 60_000
    finally:
        state.close()
        sidecar.close()


def test_the_watcher_logs_one_line_per_batch_in_the_documented_shape(tmp_path, caplog):
    """docs/watch.md: the watcher logs one line per batch, `batch 12: 3 paths in 0.21s: 2 indexed, 1 removed,
    0 unchanged, 0 failed; 2 chunks embedded, 5 reused; change->searchable 260 ms (p50 240.0, p95 410.0); 0 queued`
    (the suite's fake collection with a real folder and real watchdog)."""
    from indexer.watch.watcher import Watcher
    from tests.unit.test_watch_logic import FAST, FakeCollection, until

    root = tmp_path / "root"
    root.mkdir()
    fake = FakeCollection(tmp_path / "data", root)
    shape = re.compile(r"^batch \d+: \d+ paths in \d+\.\d\ds: \d+ indexed, \d+ removed, \d+ unchanged, \d+ failed; "
                       r"\d+ chunks embedded, \d+ reused; change->searchable \d+ ms \(p50 [\d.]+, p95 [\d.]+\); "
                       r"\d+ queued$")
    with caplog.at_level("INFO", logger="indexer.watch"), Watcher(fake, options=FAST) as watcher:
        assert watcher.wait_idle(20)
        (root / "a.md").write_text("hello")
        until(lambda: str(root / "a.md") in fake.all_synced())
        until(lambda: any(r.getMessage().startswith("batch ") for r in caplog.records))
    lines = [m for m in (r.getMessage() for r in caplog.records if r.name == "indexer.watch") if m.startswith("batch ")]
    assert lines and all(shape.match(line) for line in lines), lines


def test_stores_md_names_the_faiss_index_kinds_and_its_default():
    """docs/stores.md's Construct row: `index="auto"|"flat"|"hnsw"`, default `auto` (it named flat and hnsw only)."""
    import inspect

    from plugins.faiss import FaissStore
    from plugins.faiss.index import KINDS

    row = next(line for line in (ROOT / "docs/stores.md").read_text().splitlines() if line.startswith("| Construct"))
    said = re.search(r'index=((?:"\w+"\\\|)*"\w+")', row)
    assert said, row
    assert sorted(re.findall(r'"(\w+)"', said.group(1))) == sorted(KINDS)
    assert inspect.signature(FaissStore).parameters["index"].default == "auto" and "default `auto`" in row
