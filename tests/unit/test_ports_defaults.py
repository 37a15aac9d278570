"""Every ability the core asks of a source or a progress listener is declared on its port with a default
(indexer/ports.py); a plugin that only has the required members is put under those defaults by the registry,
and the core never probes for an ability by name at a call site (issue: Ports)."""

from __future__ import annotations

import re
from pathlib import Path

from indexer.ports import Progress, Source, SourcePlugin, as_progress, as_source
from indexer.types import Document, ScanProblem, SourceRef

ROOT = Path(__file__).resolve().parents[2]


class PlainSource:
    """Only what SourcePlugin requires, plus a problems list it rebinds per scan (as docs/plugins.md's does)."""

    def __init__(self) -> None:
        self.problems: list[ScanProblem] = []

    def scan(self):  # type: ignore[no-untyped-def]
        self.problems = [ScanProblem("/r/x", "unreadable")]
        yield SourceRef(root="/r", path="/r/a.md", size=1, mtime_ns=1)

    def available(self) -> bool:
        return True

    def read(self, ref: SourceRef) -> Document:
        return Document(path=ref.path, text="a")

    def ref_for(self, path: str) -> SourceRef | None:
        return None


class OwnAbilities(PlainSource):
    parallel_reads = 3

    def claims(self, path: str) -> bool:
        return path.endswith(".md")

    def heavy_read(self, ref: SourceRef) -> bool:
        return False


def test_a_plain_source_gets_every_default():
    plain = PlainSource()
    assert isinstance(plain, SourcePlugin) and not isinstance(plain, Source)
    source = as_source(plain)
    assert isinstance(source, Source)
    assert source.claims("/r/anything") is True  # every path inside a root: ref_for decides
    assert source.scan_below("/r/sub") is None  # the pipeline filters a full scan
    assert source.heavy_read(SourceRef(root="/r", path="/r/a.md", size=1, mtime_ns=1)) is True  # one lane
    assert source.parallel_reads == 1
    source.abort_reads()
    source.close()
    assert [r.path for r in source.scan()] == ["/r/a.md"]
    assert [p.path for p in source.problems] == ["/r/x"]  # the list the plugin bound during the scan


def test_a_plain_source_keeps_the_abilities_it_has():
    source = as_source(OwnAbilities())
    assert source.claims("/r/a.md") and not source.claims("/r/a.png")
    assert source.parallel_reads == 3
    assert source.heavy_read(SourceRef(root="/r", path="/r/a.md", size=1, mtime_ns=1)) is False


def test_a_source_that_inherits_the_port_is_taken_as_it_is():
    class Inherits(Source):
        pass

    own = Inherits()
    assert as_source(own) is own


def test_a_listener_with_some_members_gets_no_ops_for_the_others():
    seen: list[str] = []

    class OnlyDone:
        def file_done(self, path: str) -> None:
            seen.append(path)

    progress = as_progress(OnlyDone())
    assert progress is not None
    progress.files_total(3)
    progress.chunked(2)
    progress.file_part("/a", 1, 2)
    progress.embedded(1, 10)
    progress.file_done("/a")
    assert seen == ["/a"]
    base = Progress()
    assert as_progress(base) is base and as_progress(None) is None


def test_the_core_never_probes_a_source_or_a_listener_for_an_ability_by_name():
    probe = re.compile(r"getattr\(\s*(source|read\.source|self\.source|self\.progress|progress)\b|source_claims|"
                       r"isinstance\([^)]*(FolderScan|LexicalSearch)")
    found = []
    for path in (ROOT / "indexer").rglob("*.py"):
        if path.name == "ports.py":  # the defaults themselves (as_source, as_progress)
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if probe.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "declare the ability on indexer/ports.py's port instead:\n" + "\n".join(found)


def test_a_plugin_written_for_a_newer_api_is_refused_at_load_with_the_fix():
    import pytest

    from indexer.core.entry_points import PLUGIN_API_VERSION, check_api
    from indexer.errors import ConfigError
    from indexer.plugin_api import PLUGIN_API_VERSION as exported

    assert exported == PLUGIN_API_VERSION

    class Current:
        INDEXER_PLUGIN_API = PLUGIN_API_VERSION

    class Newer:
        INDEXER_PLUGIN_API = PLUGIN_API_VERSION + 1

    class Silent:
        pass

    class Bad:
        INDEXER_PLUGIN_API = "one"

    assert check_api(Current, "indexer.stores", "cur") is Current
    assert check_api(Silent, "indexer.stores", "old") is Silent  # declares nothing: loads as before
    with pytest.raises(ConfigError, match=rf"written for plugin API {PLUGIN_API_VERSION + 1}; this indexer has "
                                          rf"{PLUGIN_API_VERSION}: upgrade indexer"):
        check_api(Newer, "indexer.stores", "new")
    with pytest.raises(ConfigError, match="must be a whole number"):
        check_api(Bad, "indexer.readers", "bad")
