"""Documents read, parsed (OCR included) and chunked on a real Ray cluster's nodes (two worker nodes of one CPU on
loopback, token authentication on): real Office, OpenDocument, e-book, mail and notebook files made by their
libraries, scanned PDFs and a photo of a note read by tesseract. The points equal a one-machine index's (ids,
count, top-10 of fixed queries); both nodes parse; the bytes travel through Ray's object store, or not at all
when the roots are shared; a node killed mid-parse loses nothing; a few documents stay in the writer."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from indexer.collection.facade import open_collection
from indexer.ports import Progress
from tests.cluster.conftest import NODE
from tests.documents import PAGE_TEXT, UNIQUE, make_all, make_scanned_pdf, render_page

pytestmark = pytest.mark.slow

QUERIES = (UNIQUE["docx"], UNIQUE["epub"], "audit of the filters in May", "greenhouse thermostat nineteen degrees",
           "budget of the pumping station")
NOTES = ("The budget of the pumping station grew by a tenth.", "Bees wintered in the orchard's south hives.",
         "Our compiler now inlines small loops.", "The violin's varnish cracked in the dry hall.",
         "Glaciers retreat faster in warm summers.", "The ferry timetable changes on the first of June.")
HEAVY = 12 + 4 + 1  # make_all's documents, the scans, the photo


def _folder(base: Path) -> Path:
    from plugins.filesystem import ocr

    if ocr.missing() is not None:
        pytest.skip(f"no OCR here: {ocr.missing()}")
    folder = base / "mixed"
    make_all(folder / "office")
    scans = folder / "scans"
    scans.mkdir()
    for i in range(4):
        pages = [[f"Cover sheet {i} of the minutes."], [f"{line[:-1]} (copy {i})." for line in PAGE_TEXT]]
        make_scanned_pdf(scans / f"minutes-{i}.pdf", pages, dpi=120)  # no two texts alike: no ties in the top-10
    render_page(["The greenhouse thermostat must stay at nineteen degrees."], dpi=120).save(scans / "note.png")
    for i, text in enumerate(NOTES):  # light reads: read and chunked by the writer
        (folder / f"note-{i}.md").write_text(f"# Note {i}\n\n{text}\n")
    return folder


def _snapshot(col: Any) -> dict[str, Any]:
    ids = sorted(col.parts.state.point_ids(col.name))
    tops = {q: [h.chunk_id for h in col.search(q, k=10, mode="dense", rerank=False).hits] for q in QUERIES}
    return {"ids": ids, "count": col.parts.store.count(col.name), "tops": tops}


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory, float_model: Path) -> tuple[Path, dict[str, Any]]:
    """The mixed folder indexed by one process alone: what every cluster run must equal."""
    base = tmp_path_factory.mktemp("mixed")
    root = _folder(base)
    with open_collection("alone", embed_model=str(float_model), data_dir=str(base / "data")) as col:
        report = col.index([root])
        assert not report.failed and report.files_indexed == HEAVY + 6, report.failed
        return root, _snapshot(col)


def _parsed(work: dict[str, Any]) -> dict[str, int]:
    return {n["host"]: n["files"] for n in work["per_node"].values()}


class _Watching(Progress):
    """Keeps the cluster lines the run sends, and what ``indexer status`` reads meanwhile."""

    def __init__(self, col: Any) -> None:
        self.col, self.lines, self.status = col, [], []

    def cluster(self, work: Any) -> None:
        self.lines.append(work)
        self.status.append(self.col.status()["cluster"])


def test_documents_are_parsed_on_the_nodes_with_the_same_points(ray_cluster, mixed, float_model):
    from indexer.cli.status_view import lines

    root, want = mixed
    with open_collection("far", embed_model=str(float_model), cluster=ray_cluster.address) as col:
        watching = _Watching(col)
        report = col.index([root], progress=watching)
        got = _snapshot(col)
        after = col.status()
    # visible while it ran (the progress bar's line, `indexer status`: running now) and after (the last run)
    assert watching.lines and watching.status and watching.status[-1]["running"], watching.status
    assert after["cluster"] is not None and not after["cluster"]["running"] and after["cluster"]["nodes"] == 2
    rows = dict(lines(after, verbose=True)[-8:])
    assert any(label == "cluster" and "last run" in text and "2 workers on 2 nodes" in text
               for label, text in lines(after)), rows
    assert any("parse" in text and "transfer" in text for _, text in lines(after, verbose=True))
    assert not report.failed and report.files_indexed == HEAVY + 6
    assert got == want
    work = report.cluster
    assert work is not None
    parsed = _parsed(work)
    assert sum(parsed.values()) == HEAVY and all(parsed.values()), work  # every document on a node, both nodes busy
    sent = sum(n["bytes_sent"] for n in work["per_node"].values())
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and p.suffix != ".md")
    assert sent == size, (sent, size)  # each document's bytes sent once, through the object store
    assert all(n["parse_seconds"] > 0 for n in work["per_node"].values())
    assert "parsed" in next(n for n in report.notes if "Ray cluster" in n)


def test_shared_roots_send_no_bytes(ray_cluster, mixed, float_model):
    root, want = mixed
    with open_collection("shared", embed_model=str(float_model), cluster=ray_cluster.address,
                         cluster_shared_roots=True) as col:
        report = col.index([root])
        got = _snapshot(col)
    assert not report.failed and got == want
    work = report.cluster
    assert work is not None and sum(_parsed(work).values()) == HEAVY
    assert sum(n["bytes_sent"] for n in work["per_node"].values()) == 0  # the nodes read the files themselves


def test_a_node_killed_mid_parse_loses_nothing(ray_cluster, mixed, float_model):
    root, want = mixed

    class _KillOnFirstDocument(Progress):
        killed = None

        def file_done(self, path: str) -> None:  # a document came back from a node: others are in flight
            if self.killed is None and not path.endswith(".md"):
                self.killed = next(iter(ray_cluster.worker_nodes))
                ray_cluster.remove_node(self.killed, allow_graceful=False)

    try:
        with open_collection("killed", embed_model=str(float_model), cluster=ray_cluster.address) as col:
            killer = _KillOnFirstDocument()
            report = col.index([root], progress=killer)
            got = _snapshot(col)
        assert killer.killed is not None
        assert not report.failed and report.files_indexed == HEAVY + 6
        assert got == want, "points lost or duplicated"
        work = report.cluster
        assert work is not None and len(work["lost"]) == 1, work
        assert work["reads_resent"] + work["reads_given_back"] >= 1, work  # lost with its node, parsed again
    finally:
        while len(ray_cluster.worker_nodes) < 2:
            ray_cluster.add_node(**NODE)
        ray_cluster.wait_for_nodes()


def test_a_few_documents_stay_in_the_writer(ray_cluster, mixed, float_model, tmp_path):
    root, _ = mixed
    few = tmp_path / "few"
    few.mkdir()
    for name in ("office/sample.docx", "office/sample.odt", "scans/note.png"):
        shutil.copy(root / name, few / Path(name).name)
    with open_collection("few", embed_model=str(float_model), cluster=ray_cluster.address) as col:
        report = col.index([few])
    assert not report.failed and report.files_indexed == 3
    work = report.cluster
    assert work is None or sum(_parsed(work).values()) == 0  # three documents: Ray's dispatch is not worth it


def test_a_reindex_parses_its_documents_on_the_nodes(ray_cluster, mixed, float_model, other_weights,
                                                      monkeypatch):
    """The reindex to another model (same tokenizer: the same chunks, so the same ids) re-reads the documents on
    the nodes too."""
    from indexer.cluster.parsing import ClusterReads
    from indexer.collection import reindex

    root, want = mixed
    sent: list[str] = []
    start = ClusterReads.start

    def counted(self, source, ref):  # type: ignore[no-untyped-def]
        sent.append(ref.path)
        return start(self, source, ref)

    with open_collection("re", embed_model=str(float_model), cluster=ray_cluster.address) as col:
        col.index([root])  # (closed after: its workers hold the nodes' CPUs, the reindex's need them)
    with open_collection("re", cluster=ray_cluster.address) as col:
        monkeypatch.setattr(ClusterReads, "start", counted)
        report = reindex.run(col, str(other_weights))
        ids = sorted(col.parts.state.point_ids(col.name))
    assert report.switched and ids == want["ids"]
    assert len(set(sent)) == HEAVY  # every document of the reindex went to a node
