"""`indexer watch` end to end: real folders, real watchdog (inotify), the real model, FAISS and embedded Qdrant.

Every test changes files the way users and editors do and asserts what search returns afterwards. Waits are
conditions with a deadline (``until``), never fixed sleeps.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import indexer
from indexer.errors import StoreUnavailableError
from indexer.state.watch_files import load_queue, read_status
from indexer.watch.batch import What
from indexer.watch.watcher import Watcher, WatchOptions
from tests.integration.corpus import write_corpus
from tests.integration.waiting import until as wait_until

pytestmark = pytest.mark.slow

OPTIONS = WatchOptions(rescan_seconds=0)
DEADLINE = 120.0


def until(predicate: Callable[[], Any], timeout: float = DEADLINE, what: str = "condition") -> Any:
    return wait_until(predicate, timeout, what, poll=0.02)


@dataclass
class Live:
    col: Any
    watcher: Watcher
    root: Path

    def paths_for(self, query: str, k: int = 10, **opts: Any) -> list[str]:
        return [os.path.relpath(h.path, self.root) for h in self.col.search(query, k=k, **opts).hits]

    def top(self, query: str) -> str | None:
        hits = self.paths_for(query, k=1)
        return hits[0] if hits else None

    def files(self) -> set[str]:
        return {os.path.relpath(p, self.root) for p in self.col.state.files(self.col.name)}

    def texts(self) -> str:
        """Every indexed chunk text (from the store, through search with a broad k)."""
        hits = self.col.search("anything", k=100).hits
        return "\n".join(h.text for h in hits)

    def settle(self, predicate: Callable[[], Any], what: str = "condition") -> Any:
        """Wait until the watcher is idle and ``predicate`` holds (checked only while idle)."""

        def check() -> Any:
            return self.watcher.wait_idle(DEADLINE) and predicate()

        return until(check, what=what)

    def embedded(self) -> int:
        return self.watcher.totals["chunks_embedded"]


def _open_live(tmp_path: Path, store: str, docs: dict[str, str] | None = None) -> Iterator[Live]:
    root = write_corpus(tmp_path / "root", docs) if docs is not None else write_corpus(tmp_path / "root")
    root = root.resolve()
    col = indexer.open_collection(f"watch-{store}", store=store)
    watcher = Watcher(col, [root], OPTIONS)
    watcher.start()
    try:
        assert watcher.wait_idle(DEADLINE), "initial reconciliation did not finish"
        yield Live(col, watcher, root)
    finally:
        watcher.stop()
        col.close()


@pytest.fixture(params=["faiss", "qdrant"])
def live(request, tmp_path, embed_model_path) -> Iterator[Live]:
    yield from _open_live(tmp_path, request.param)


@pytest.fixture
def live_faiss(tmp_path, embed_model_path) -> Iterator[Live]:
    yield from _open_live(tmp_path, "faiss")


def test_create_modify_delete(live):
    assert live.files() == {
        "baking/bread.md",
        "astronomy/planets.txt",
        "code/retry.py",
        "garden/tomatoes.rst",
        "web/page.html",
    }
    (live.root / "sea.md").write_text("# Octopus\n\nAn octopus has three hearts and blue blood.\n")
    live.settle(lambda: live.top("how many hearts does an octopus have") == "sea.md", "created file searchable")

    (live.root / "sea.md").write_text("# Jellyfish\n\nJellyfish drift with ocean currents and sting prey.\n")
    live.settle(lambda: "Jellyfish" in live.col.search("drifting animals that sting", k=1).hits[0].text, "edit")
    assert "Octopus" not in live.texts()

    (live.root / "sea.md").unlink()
    live.settle(lambda: "sea.md" not in live.files(), "delete")
    assert all(p != "sea.md" for p in live.paths_for("jellyfish ocean currents"))
    status = live.col.status()
    assert status["points"] == status["chunks"]


def test_rename_moves_points_without_embedding(live):
    before = live.embedded()
    os.rename(live.root / "garden" / "tomatoes.rst", live.root / "garden" / "tomato-care.rst")
    live.settle(lambda: "garden/tomato-care.rst" in live.files() and "garden/tomatoes.rst" not in live.files())
    assert live.top("tomato seedlings after the frost") == "garden/tomato-care.rst"
    assert live.embedded() == before, "a rename re-embedded chunks"


def test_folder_moved_out_and_back_in(live, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    before = live.embedded()
    shutil.move(str(live.root / "baking"), str(outside / "baking"))
    live.settle(lambda: "baking/bread.md" not in live.files(), "tree moved out")
    assert all(not p.startswith("baking/") for p in live.paths_for("knead the dough and bake the loaf"))

    shutil.move(str(outside / "baking"), str(live.root / "kitchen"))
    live.settle(lambda: "kitchen/bread.md" in live.files(), "tree moved back in")
    assert live.top("knead the dough and bake the loaf") == "kitchen/bread.md"
    assert live.embedded() == before, "moving a tree back in re-embedded chunks"


def test_folder_created_then_deleted(live):
    deep = live.root / "new" / "deeper"
    deep.mkdir(parents=True)
    (deep / "owls.md").write_text("Owls hunt at night and swallow mice whole.\n")
    (live.root / "new" / "bees.md").write_text("Honey bees dance to show where the flowers are.\n")
    live.settle(lambda: {"new/deeper/owls.md", "new/bees.md"} <= live.files(), "new tree indexed")
    assert live.top("birds that hunt at night") == "new/deeper/owls.md"
    shutil.rmtree(live.root / "new")
    live.settle(lambda: not any(p.startswith("new/") for p in live.files()), "deleted tree removed")
    assert all(not p.startswith("new/") for p in live.paths_for("owls and bees"))


def test_gitignore_edits(live):
    (live.root / ".gitignore").write_text("astronomy/\n*.py\n")
    live.settle(lambda: not ({"astronomy/planets.txt", "code/retry.py"} & live.files()), "newly ignored removed")
    assert "astronomy/planets.txt" not in live.paths_for("rings of Saturn")
    (live.root / ".gitignore").write_text("*.py\n")
    live.settle(lambda: "astronomy/planets.txt" in live.files(), "newly included indexed")
    assert live.top("rings of Saturn") == "astronomy/planets.txt"
    (live.root / ".gitignore").unlink()
    live.settle(lambda: "code/retry.py" in live.files(), "ignore file deleted")


def test_links_to_what_the_rules_keep_out_index_nothing_and_a_replaced_file_is_rechecked(live_faiss):
    """Issue 41: the watcher asks the rules of a link's target: `a.md -> .env` and `b.md -> private.txt` (ignored)
    index nothing; an indexed `c.md` replaced by a link to the ignored file loses its record; a link retargeted
    to a file the rules take leaves that file indexed under its own path."""
    live = live_faiss
    (live.root / ".gitignore").write_text("private.txt\n")
    (live.root / ".env").write_text("TOKEN=zebraquartz7731\n")
    (live.root / "private.txt").write_text("The private diary mentions the walrus code 4417.\n")
    (live.root / "c.md").write_text("Cats sleep sixteen hours a day.\n")
    live.settle(lambda: "c.md" in live.files(), "the plain file")
    (live.root / "a.md").symlink_to(live.root / ".env")
    (live.root / "b.md").symlink_to(live.root / "private.txt")
    (live.root / "c.md").unlink()
    (live.root / "c.md").symlink_to(live.root / "private.txt")
    (live.root / "keep.md").write_text("Otters hold hands while they sleep.\n")
    live.settle(lambda: "keep.md" in live.files() and "c.md" not in live.files(), "the links' batch")
    assert not {".env", "private.txt", "a.md", "b.md", "c.md"} & live.files()
    for secret in ("zebraquartz7731", "walrus"):
        assert not live.col.search(secret, mode="lexical", k=5).hits, secret
    (live.root / "b.md").unlink()
    (live.root / "b.md").symlink_to(live.root / "keep.md")  # retargeted to a file taken on its own
    (live.root / "mark.md").write_text("Puffins nest in burrows on cliffs.\n")
    live.settle(lambda: "mark.md" in live.files(), "the retarget's batch")
    assert {"keep.md", "mark.md"} <= live.files() and not {"b.md", "private.txt"} & live.files()


def test_editor_atomic_save_and_vim_backup_dance(live_faiss):
    live = live_faiss
    target = live.root / "baking" / "bread.md"
    # atomic save: write a temp file, rename it over the target
    tmp = live.root / "baking" / "bread.md.tmp123"
    tmp.write_text("# Baking bread\n\nRye bread needs a sour starter and a long, slow proof.\n")
    os.replace(tmp, target)
    live.settle(lambda: "Rye bread" in live.texts(), "atomic save")
    assert live.files() >= {"baking/bread.md"} and "baking/bread.md.tmp123" not in live.files()

    removed_before = live.watcher.totals["files_removed"]
    # vim (backupcopy=no): rename the original aside, write a new file, delete the backup; also vim's 4913 probe
    (live.root / "baking" / "4913").write_text("")
    (live.root / "baking" / "4913").unlink()
    os.rename(target, live.root / "baking" / "bread.md~")
    target.write_text("# Baking bread\n\nFocaccia is an olive-oil flatbread dimpled by fingertips.\n")
    (live.root / "baking" / "bread.md~").unlink()
    live.settle(lambda: "Focaccia" in live.texts() and "Rye bread" not in live.texts(), "vim save")
    assert live.watcher.totals["files_removed"] == removed_before, "the briefly vanished file was deleted"
    assert "baking/bread.md~" not in live.files() and "baking/4913" not in live.files()


def test_rename_storm(live_faiss):
    live = live_faiss
    folder = live.root / "storm"
    folder.mkdir()
    for i in range(30):
        (folder / f"n{i}.md").write_text(
            f"Storm note {i}: wind speed {i * 7} knots from the {['north', 'south'][i % 2]}.\n"
        )
    live.settle(lambda: sum(p.startswith("storm/") for p in live.files()) == 30, "storm files indexed")
    before = live.embedded()
    for _round in range(10):
        for i in range(30):
            os.rename(folder / f"n{i}.md", folder / f"m{i}.md")
        for i in range(30):
            os.rename(folder / f"m{i}.md", folder / f"n{i}.md")
    for i in range(0, 30, 3):
        os.rename(folder / f"n{i}.md", folder / f"renamed{i}.md")
    expected = {f"storm/{'renamed' if i % 3 == 0 else 'n'}{i}.md" for i in range(30)}
    live.settle(lambda: {p for p in live.files() if p.startswith("storm/")} == expected, "storm converged")
    assert live.embedded() == before, "renames re-embedded chunks"
    status = live.col.status()
    assert status["points"] == status["chunks"]


def test_bad_file_is_reported_and_others_indexed(live_faiss):
    live = live_faiss
    (live.root / "broken.pdf").write_bytes(b"%PDF-1.7 this is not really a pdf")
    (live.root / "fine.md").write_text("Penguins huddle together to survive the Antarctic winter.\n")
    live.settle(lambda: "fine.md" in live.files() and str(live.root / "broken.pdf") in live.watcher.errors)
    assert live.top("birds huddling in the Antarctic cold") == "fine.md"
    status = read_status(live.col.settings.data_dir, live.col.name)
    assert status is not None and str(live.root / "broken.pdf") in status["errors"]
    (live.root / "broken.pdf").unlink()
    live.settle(lambda: str(live.root / "broken.pdf") not in live.watcher.errors, "error cleared after delete")


def test_a_name_that_is_not_utf8_is_reported_alone_and_cleared_on_delete(live_faiss):
    live = live_faiss
    odd = os.fsencode(live.root) + b"/\xff\xfe.md"
    with open(odd, "wb") as fh:
        fh.write(b"Walruses use their tusks to haul out onto the ice.\n")
    (live.root / "fine.md").write_text("Penguins huddle together to survive the Antarctic winter.\n")
    odd_path = os.fsdecode(odd)
    live.settle(lambda: "fine.md" in live.files() and odd_path in live.watcher.errors, "odd name reported")
    assert "rename it" in live.watcher.errors[odd_path]
    assert live.top("birds huddling in the Antarctic cold") == "fine.md"
    raw = (Path(live.col.settings.data_dir) / "watch" / f"{live.col.name}.status.json").read_bytes()
    status = json.loads(raw.decode("utf-8"))  # strict UTF-8, no lone surrogates
    shown = str(live.root) + "/\\xff\\xfe.md"
    assert shown in status["errors"] and "\\ud" not in raw.decode("utf-8")
    assert shown in read_status(live.col.settings.data_dir, live.col.name)["errors"]
    os.unlink(odd)
    live.settle(lambda: odd_path not in live.watcher.errors, "error cleared after delete")
    assert live.watcher.status()["errors"] == {}


def test_a_log_appended_every_100ms_does_not_hold_back_other_edits(live_faiss):
    """A logger that opens, appends and closes every 100 ms (each sync of its 1 MB re-reads and re-chunks it all)
    must not make every batch wait for it: edits elsewhere stay searchable in well under a second or two."""
    import threading
    import time

    live = live_faiss
    log = live.root / "app.log"
    block = "".join(f"2026-12-01 INFO worker-{i % 7} handled request {i} in {i * 3 % 97} ms\n" for i in range(40))
    log.write_text(block * 400)  # ~1 MB (repeated lines: its chunks embed once)
    live.settle(lambda: "app.log" in live.files(), "log indexed")
    stop = threading.Event()

    def append() -> None:
        n = 0
        while not stop.is_set():
            with open(log, "a") as fh:
                fh.write(f"2026-12-01 WARN appended line {n}\n")
            n += 1
            stop.wait(0.1)

    writer = threading.Thread(target=append, daemon=True)
    writer.start()
    latencies = []
    try:
        note = live.root / "note.md"
        for i in range(6):
            marker = f"lighthouse{i}keeper"
            started = time.monotonic()
            note.write_text(f"# Note\n\nThe {marker} logged the storm at dawn.\n")
            until(
                lambda marker=marker: any(
                    marker in h.text for h in live.col.search(marker, k=3, path_prefix=str(note)).hits
                ),
                what=f"edit {i} searchable",
            )
            latencies.append(time.monotonic() - started)
    finally:
        stop.set()
        writer.join()
    latencies.sort()
    assert latencies[len(latencies) // 2] < 1.5, latencies  # each batch used to carry the log (seconds each)
    assert live.watcher.status()["held_back"] <= 1


class FlakyStore:
    """The real store behind a switch that makes it unreachable (StoreUnavailableError), like a server down."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.down = False

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr) or name in ("search", "close", "collection_meta"):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.down:
                raise StoreUnavailableError("cannot reach the store (switched off by the test)")
            return attr(*args, **kwargs)

        return call


def test_store_unreachable_then_restored_loses_nothing(live):
    flaky = FlakyStore(live.col.store)
    live.col.parts._store = flaky  # the parts' lazily built store, replaced by the switchable wrapper
    flaky.down = True
    (live.root / "comet.md").write_text("Halley's comet returns every 76 years.\n")
    (live.root / "astronomy" / "planets.txt").unlink()
    data_dir = live.col.settings.data_dir
    until(lambda: str(live.root / "comet.md") in load_queue(data_dir, live.col.name), what="queue persisted")
    until(lambda: (read_status(data_dir, live.col.name) or {}).get("state") == "waiting to retry")
    assert "comet.md" not in live.files()
    flaky.down = False
    live.settle(lambda: "comet.md" in live.files() and "astronomy/planets.txt" not in live.files(), "applied")
    assert live.top("a comet that returns every 76 years") == "comet.md"
    assert load_queue(data_dir, live.col.name) == []


def test_service_hook_with_the_real_collection(tmp_path, embed_model_path):
    """The HTTP service's way in: ``Watcher(collection).start()`` with the collection it writes with."""
    from indexer.watch import Watcher

    root = write_corpus(tmp_path / "root").resolve()
    with indexer.open_collection("svc") as col:
        col.index([root])
        handle = Watcher(col)
        handle.start()
        try:
            (root / "kites.md").write_text("Kites fly best in steady coastal winds.\n")
            until(lambda: handle.wait_idle(DEADLINE) and any(p.endswith("kites.md") for p in col.state.files("svc")))
            hits = col.search("flying a kite at the beach", k=1).hits
            assert hits[0].path.endswith("kites.md")
            assert handle.freshness()["samples"] >= 1
        finally:
            handle.stop()


def test_a_file_still_being_written_ends_up_complete(live_faiss):
    live = live_faiss
    path = live.root / "growing.md"
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("# Log\n\nFirst the glacier advanced across the valley floor.\n")
        fh.flush()
        # the writer pauses with the file open: once size and mtime hold still, the part written so far is indexed
        live.settle(lambda: "growing.md" in live.files(), "partial file indexed after settling")
        fh.write("\nThen the glacier retreated and left a moraine lake behind.\n")
    live.settle(lambda: "moraine lake" in live.texts(), "the complete file indexed after the close")
    hits = live.col.search("a lake left behind by a retreating glacier", k=1).hits
    assert hits[0].path.endswith("growing.md") and "advanced" in hits[0].text


def test_polling_mode_for_network_filesystems(tmp_path, embed_model_path):
    root = write_corpus(tmp_path / "root").resolve()
    with indexer.open_collection("polled") as col:
        watcher = Watcher(col, [root], WatchOptions(polling=True, poll_seconds=0.2, rescan_seconds=0))
        watcher.start()
        try:
            assert watcher.polled_roots == [str(root)]
            live = Live(col, watcher, root)
            heard: set[str] = set()
            on_event = watcher.on_event

            def spy(path: str, what: What) -> None:
                heard.add(os.path.basename(path))
                on_event(path, what)

            watcher.on_event = spy  # type: ignore[method-assign]
            (root / "nfs.md").write_text("Network shares need polling because inotify never hears their changes.\n")
            live.settle(lambda: "nfs.md" in live.files(), "polled change indexed")
            assert live.top("why network shares are polled") == "nfs.md"
            # The start-up scan may index nfs.md before the poller has seen it; renamed before the poller's next
            # look, nfs.md would never be seen to go (the race documented in docs/watch.md). A file written now
            # and reported by the poller proves it has looked since nfs.md was written.
            (root / "marker.md").write_text("A marker the poller reports.\n")
            until(lambda: "marker.md" in heard, what="the poller reports a later file")
            os.rename(root / "nfs.md", root / "smb.md")
            live.settle(lambda: "smb.md" in live.files() and "nfs.md" not in live.files(), "polled rename")
        finally:
            watcher.stop()
