"""FilesystemSource on real temp directories: ignore rules, symlinks, sizes, binary sniffing, read errors."""

from __future__ import annotations

import codecs
import hashlib
import os
import time
from pathlib import Path
from typing import Any

import pytest

from indexer.errors import SourceError
from indexer.ports import Source
from indexer.types import Document, SourceRef
from plugins.filesystem import FilesystemSource, ScanProblem
from tests.unit.test_readers import make_pdf


def write(path: Path, content: str | bytes = "text\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def rels(source: FilesystemSource) -> list[str]:
    return sorted(ref.rel_path for ref in source.scan())


def test_is_a_source_and_refs_are_resolved_stat_only(tmp_path: Path) -> None:
    root = tmp_path / "root"
    f = write(root / "docs" / "a.md", "# A\n")
    source = FilesystemSource([str(root / "docs" / "..")])
    assert isinstance(source, Source)
    (ref,) = list(source.scan())
    st = f.stat()
    assert ref == SourceRef(root=str(root.resolve()), path=str(f.resolve()), size=st.st_size, mtime_ns=st.st_mtime_ns)
    assert ref.rel_path == "docs/a.md"


def test_gitignore_root_nested_negation_and_indexerignore(tmp_path: Path) -> None:
    write(tmp_path / ".gitignore", "*.log\nbuild/\n/top-only.txt\n")
    write(tmp_path / "app.log")
    write(tmp_path / "keep.md")
    write(tmp_path / "top-only.txt")
    write(tmp_path / "sub" / "top-only.txt")  # anchored pattern applies to the root only
    write(tmp_path / "build" / "out.txt")
    write(tmp_path / "sub" / "build" / "out.txt")
    write(tmp_path / "sub" / ".gitignore", "!important.log\n*.tmp.md\n")
    write(tmp_path / "sub" / "important.log")  # re-included by the nested file
    write(tmp_path / "sub" / "other.log")
    write(tmp_path / "sub" / "x.tmp.md")
    write(tmp_path / "x.tmp.md")  # the nested rule does not reach the parent
    write(tmp_path / "sub" / "deeper" / ".indexerignore", "secret.md\n")
    write(tmp_path / "sub" / "deeper" / "secret.md")
    write(tmp_path / "sub" / "deeper" / "public.md")
    write(tmp_path / ".indexerignore", "!app.log\ndrafts/\n")  # read after .gitignore: re-includes app.log
    write(tmp_path / "drafts" / "d.md")
    assert rels(FilesystemSource([tmp_path])) == [
        "app.log",
        "keep.md",
        "sub/deeper/public.md",
        "sub/important.log",
        "sub/top-only.txt",
        "x.tmp.md",
    ]


def test_ignored_directory_is_not_entered_even_with_negation(tmp_path: Path) -> None:
    write(tmp_path / ".gitignore", "vendor/\n!vendor/keep.md\n")
    write(tmp_path / "vendor" / "keep.md")
    write(tmp_path / "main.md")
    assert rels(FilesystemSource([tmp_path])) == ["main.md"]


def test_include_and_exclude_globs(tmp_path: Path) -> None:
    for rel in ("a.md", "b.txt", "docs/c.md", "docs/private/d.md", "src/e.py", "src/gen/f.py"):
        write(tmp_path / rel)
    assert rels(FilesystemSource([tmp_path], include=["*.md"])) == ["a.md", "docs/c.md", "docs/private/d.md"]
    assert rels(FilesystemSource([tmp_path], include=["docs/**"], exclude=["private/"])) == ["docs/c.md"]
    assert rels(FilesystemSource([tmp_path], exclude=["src/gen", "*.txt"])) == [
        "a.md",
        "docs/c.md",
        "docs/private/d.md",
        "src/e.py",
    ]


def test_hidden_and_git_skipped(tmp_path: Path) -> None:
    write(tmp_path / ".git" / "config")
    write(tmp_path / ".hidden.md")
    write(tmp_path / ".cache" / "x.md")
    write(tmp_path / "sub" / ".env")
    write(tmp_path / "visible.md")
    assert rels(FilesystemSource([tmp_path])) == ["visible.md"]


def test_binary_and_unknown_extensions(tmp_path: Path) -> None:
    write(tmp_path / "README", "no extension text\n")
    write(tmp_path / "notes.weird", "unknown extension but text ü\n")
    write(tmp_path / "blob", b"\x7fELF\x00\x01\x02")
    write(tmp_path / "latin1.dat2", "café au lait, crème brûlée\n".encode("latin-1"))
    write(tmp_path / "sound.mp3", b"ID3\x04\x00")  # a binary type no reader claims (images have the OCR reader)
    write(tmp_path / "empty", b"")
    # binary content under text names is skipped the same way (before: read and failed as invalid UTF-8)
    write(tmp_path / "renamed.txt", b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))
    write(tmp_path / "data.md", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    write(tmp_path / "utf16.txt", codecs.BOM_UTF16_LE + "wide text\n".encode("utf-16-le"))
    source = FilesystemSource([tmp_path])
    # a scan reads only files no reader claims by name; binary content under a text name is found on read
    assert rels(source) == ["README", "data.md", "empty", "latin1.dat2", "notes.weird", "renamed.txt", "utf16.txt"]
    problems = {Path(p.path).name: p.code for p in source.problems}
    assert problems == {"blob": "binary", "sound.mp3": "binary"}
    for name in ("renamed.txt", "data.md"):
        ref = source.ref_for(tmp_path / name)
        assert ref is not None
        with pytest.raises(SourceError, match="binary content") as exc:
            source.read(ref)
        assert exc.value.code == "binary"
    latin1 = source.read(next(r for r in source.scan() if r.rel_path == "latin1.dat2"))
    assert latin1.text == "café au lait, crème brûlée\n"
    assert source.read(next(r for r in source.scan() if r.rel_path == "utf16.txt")).text == "wide text\n"
    assert source.read(next(r for r in source.scan() if r.rel_path == "README")).kind == "text"


def test_multibyte_character_cut_at_the_sniff_boundary_is_text(tmp_path: Path) -> None:
    write(tmp_path / "LICENSE", "a" * 8191 + "é" * 10)  # é straddles byte 8192
    assert rels(FilesystemSource([tmp_path])) == ["LICENSE"]


def test_max_file_size_reported_not_read(tmp_path: Path) -> None:
    write(tmp_path / "small.txt", "x" * 100)
    write(tmp_path / "big.txt", "x" * 101)
    source = FilesystemSource([tmp_path], max_file_size=100)
    assert rels(source) == ["small.txt"]
    assert [(Path(p.path).name, p.code) for p in source.problems] == [("big.txt", "too_large")]
    path, reason = source.problems[0]
    assert "101 bytes exceeds max_file_size 100" in reason


def test_symlink_inside_root_followed_and_deduplicated(tmp_path: Path) -> None:
    real = write(tmp_path / "real" / "doc.md")
    write(tmp_path / "real" / "other.md")
    (tmp_path / "alias").symlink_to(tmp_path / "real", target_is_directory=True)
    (tmp_path / "link.md").symlink_to(real)
    source = FilesystemSource([tmp_path])
    refs = list(source.scan())
    assert sorted(r.path for r in refs) == sorted(
        {str(real.resolve()), str((tmp_path / "real" / "other.md").resolve())}
    )
    assert source.problems == []


def test_symlinked_folder_whose_target_is_ignored_is_not_followed(tmp_path: Path) -> None:
    """Issue 41: the rules apply to what a link points at (a `.indexerignore` `!data/` lets it in again)."""
    root = tmp_path / "root"
    write(root / ".gitignore", "data/\n")
    write(root / "data" / "x.md")
    write(root / ".hidden" / "y.md")
    write(root / "ok.md")
    (root / "view").symlink_to(root / "data", target_is_directory=True)
    (root / "peek").symlink_to(root / ".hidden", target_is_directory=True)
    source = FilesystemSource([root])
    assert rels(source) == ["ok.md"]
    assert list(source.scan_below(root / "view")) == []
    assert source.ref_for(root / "view" / "x.md") is None and source.ref_for(root / "peek" / "y.md") is None
    write(root / ".indexerignore", "!data/\n")
    assert rels(FilesystemSource([root])) == ["data/x.md", "ok.md"]


def test_links_to_hidden_or_ignored_files_index_nothing(tmp_path: Path) -> None:
    """Issue 41: a root with `.env`, a `.gitignore` listing `private.txt`, `a.md -> .env`, `b.md -> private.txt`
    (and `c.md -> sub/x.md` under an ignored folder, `d.md -> notes.md` that is taken on its own): scan and ref_for
    yield neither secret."""
    root = tmp_path / "root"
    write(root / ".env", "TOKEN=s3cr3t\n")
    write(root / ".gitignore", "private.txt\nsub/\n")
    write(root / "private.txt", "private words\n")
    write(root / "sub" / "x.md", "under an ignored folder\n")
    notes = write(root / "notes.md", "fine\n")
    for name, target in (("a.md", ".env"), ("b.md", "private.txt"), ("c.md", "sub/x.md"), ("d.md", "notes.md")):
        (root / name).symlink_to(root / target)
    source = FilesystemSource([root])
    assert [r.path for r in source.scan()] == [str(notes.resolve())]
    assert source.problems == []
    for name in ("a.md", "b.md", "c.md"):
        assert source.ref_for(root / name) is None, name
        assert not source.accepts(root / name)
    ref = source.ref_for(root / "d.md")
    assert ref is not None and ref.path == str(notes.resolve())
    # exclude globs are asked of the target too; include globs of the link's name
    assert [r.path for r in FilesystemSource([root], exclude=["notes.md"]).scan()] == []
    assert [r.path for r in FilesystemSource([root], include=["d.md"]).scan()] == [str(notes.resolve())]


def test_symlink_escaping_root_skipped_and_reported(tmp_path: Path) -> None:
    outside = write(tmp_path / "outside" / "secret.md")
    root = tmp_path / "root"
    write(root / "ok.md")
    (root / "file-link.md").symlink_to(outside)
    (root / "dir-link").symlink_to(outside.parent, target_is_directory=True)
    (root / "dotdot").symlink_to(Path("..") / "outside")
    source = FilesystemSource([root])
    assert rels(source) == ["ok.md"]
    assert sorted((Path(p.path).name, p.code) for p in source.problems) == [
        ("dir-link", "outside_root"),
        ("dotdot", "outside_root"),
        ("file-link.md", "outside_root"),
    ]


def test_symlink_target_in_another_root_is_taken(tmp_path: Path) -> None:
    target = write(tmp_path / "b" / "shared.md")
    write(tmp_path / "a" / "own.md")
    (tmp_path / "a" / "to-b.md").symlink_to(target)
    source = FilesystemSource([tmp_path / "a", tmp_path / "b"])
    refs = {r.path: r.root for r in source.scan()}
    assert refs == {
        str((tmp_path / "a" / "own.md").resolve()): str((tmp_path / "a").resolve()),
        str(target.resolve()): str((tmp_path / "b").resolve()),
    }


def test_symlink_loops_do_not_hang(tmp_path: Path) -> None:
    write(tmp_path / "d" / "x.md")
    (tmp_path / "d" / "self").symlink_to(tmp_path / "d", target_is_directory=True)
    (tmp_path / "d" / "up").symlink_to(tmp_path, target_is_directory=True)
    (tmp_path / "loop-a").symlink_to(tmp_path / "loop-b")
    (tmp_path / "loop-b").symlink_to(tmp_path / "loop-a")
    (tmp_path / "dangling").symlink_to(tmp_path / "missing")
    source = FilesystemSource([tmp_path])
    assert rels(source) == ["d/x.md"]  # returns at all (the suite's timeout guards against a hang)
    codes = sorted((Path(p.path).name, p.code) for p in source.problems)
    assert codes == [("dangling", "broken_symlink"), ("loop-a", "symlink_loop"), ("loop-b", "symlink_loop")]


def test_follow_symlinks_false(tmp_path: Path) -> None:
    write(tmp_path / "real" / "a.md")
    (tmp_path / "alias.md").symlink_to(tmp_path / "real" / "a.md")
    (tmp_path / "aliasdir").symlink_to(tmp_path / "real", target_is_directory=True)
    assert rels(FilesystemSource([tmp_path], follow_symlinks=False)) == ["real/a.md"]


def test_unreadable_directory_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "ok.md")
    write(tmp_path / "locked" / "x.md")
    real_scandir = os.scandir
    locked = str(tmp_path / "locked")

    def fake_scandir(path: str) -> Any:
        if os.fspath(path) == locked:  # root ignores chmod, so deny this one folder here
            raise PermissionError(13, "Permission denied", path)
        return real_scandir(path)

    monkeypatch.setattr("plugins.filesystem.source.os.scandir", fake_scandir)
    seen: list[ScanProblem] = []
    source = FilesystemSource([tmp_path], on_problem=seen.append)
    assert rels(source) == ["ok.md"]
    assert [(p.path, p.code) for p in source.problems] == [(locked, "permission")]
    assert seen == source.problems


def test_missing_root_reported_as_unavailable(tmp_path: Path) -> None:
    write(tmp_path / "present" / "a.md")
    source = FilesystemSource([tmp_path / "gone", tmp_path / "present"])
    assert rels(source) == ["a.md"]
    assert [p.code for p in source.problems] == ["root_unavailable"]
    assert not source.available()  # the port says so: the caller must not read the empty root as deletions
    (tmp_path / "gone").mkdir()
    assert rels(source) == ["a.md"] and source.available()
    assert isinstance(source, Source)


def test_file_as_root(tmp_path: Path) -> None:
    f = write(tmp_path / "single.md")
    write(tmp_path / "sibling.md")
    source = FilesystemSource([f])
    assert [r.path for r in source.scan()] == [str(f.resolve())]
    assert source.contains(f) and not source.contains(tmp_path / "sibling.md")


def test_problems_reset_per_scan(tmp_path: Path) -> None:
    write(tmp_path / "blob", b"\x00\x00")
    source = FilesystemSource([tmp_path])
    list(source.scan())
    list(source.scan())
    assert len(source.problems) == 1


def test_scan_of_2000_files_applies_ignore_rules(tmp_path: Path) -> None:
    # the scan's speed is measured by bench/scan_chunk_speed.py
    write(tmp_path / ".gitignore", "*.log\nignored/\n")
    for d in range(40):
        for f in range(50):
            write(tmp_path / f"dir{d}" / f"file{f}.{'md' if f % 2 else 'py'}", "x\n")
        write(tmp_path / f"dir{d}" / "skip.log")
    source = FilesystemSource([tmp_path])
    refs = list(source.scan())
    assert len(refs) == 2000
    assert not any(r.path.endswith(".log") for r in refs)


def test_scan_order_is_deterministic(tmp_path: Path) -> None:
    for name in ("b/z.md", "a/y.md", "c.md", "a/b/x.md"):
        write(tmp_path / name)
    assert [r.rel_path for r in FilesystemSource([tmp_path]).scan()] == ["c.md", "a/y.md", "a/b/x.md", "b/z.md"]


def _mixed_tree(root: Path) -> None:
    """Names that exercise the scan's per-folder shortcuts: extensions (none, trailing dot, upper case, two
    dots, binary), a symlink to a hidden file (not taken), a symlinked folder, a file nested roots own."""
    for rel in ("a.md", "README", "weird.", "UPPER.MD", "two.tar.txt", "sub/b.py", "sub/deep/c.txt", "sub/own.md"):
        write(root / rel, f"text of {rel}\n")
    write(root / "sub" / ".hidden-target.md", "reached through a link\n")
    write(root / "blob.GZ", "text under a binary extension\n")
    write(root / "sub" / "noext-binary", b"\x00\x01\x02")
    (root / "link.md").symlink_to(root / "sub" / ".hidden-target.md")
    (root / "alias").symlink_to(root / "sub" / "deep", target_is_directory=True)


def test_scan_yields_what_ref_for_yields_file_by_file(tmp_path: Path) -> None:
    """The scan works out owners, extensions and resolved paths per folder; ref_for does it per path.
    Both must agree, with nested roots (a folder and a single file) and without."""
    root = tmp_path / "root"
    _mixed_tree(root)
    for roots in ([root], [root, root / "sub" / "own.md"], [root / "sub", root]):
        source = FilesystemSource(roots)
        scanned = list(source.scan())
        files = [Path(d) / f for d, _, names in os.walk(root) for f in names]
        by_path = [ref for ref in (source.ref_for(f) for f in files) if ref is not None]
        assert sorted(scanned, key=lambda r: r.path) == sorted(set(by_path), key=lambda r: r.path), roots
    owners = {ref.path: ref.root for ref in FilesystemSource([root, root / "sub" / "own.md"]).scan()}
    assert owners[str((root / "sub" / "own.md").resolve())] == str((root / "sub" / "own.md").resolve())
    assert sorted(rels(FilesystemSource([root]))) == [
        "README", "UPPER.MD", "a.md", "sub/b.py", "sub/deep/c.txt", "sub/own.md", "two.tar.txt", "weird.",
    ]  # fmt: skip (the link to the hidden file indexes nothing: issue 41)


def test_rules_that_match_nothing_change_no_ref(tmp_path: Path) -> None:
    """Folders without ignore files or globs skip the per-file rule checks; rules that exclude nothing must
    give the very same refs, in the same order, as no rules at all."""
    root = tmp_path / "root"
    _mixed_tree(root)
    plain = list(FilesystemSource([root]).scan())
    globbed = list(FilesystemSource([root], include=["*"], exclude=["*.nothing", "nowhere/"]).scan())
    write(root / ".indexerignore", "*.nothing\n")
    write(root / "sub" / ".gitignore", "nowhere/\n")
    ignored = list(FilesystemSource([root]).scan())
    assert len(plain) == 8 and plain == globbed == ignored


# ------------------------------------------------------------------------------------------------ contains


def test_contains_prefix_collisions_and_dotdot(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    (tmp_path / "project").mkdir()
    (tmp_path / "proj-old").mkdir()
    source = FilesystemSource([root])
    assert source.contains(root)
    assert source.contains(root / "a" / "b.md")  # need not exist
    assert not source.contains(tmp_path / "project" / "a.md")
    assert not source.contains(tmp_path / "proj-old")
    assert not source.contains(str(root) + "/../project/a.md")
    assert not source.contains(tmp_path)
    (root / "escape").symlink_to(tmp_path / "project", target_is_directory=True)
    assert not source.contains(root / "escape" / "a.md")


def test_kind_for_and_accepts(tmp_path: Path) -> None:
    write(tmp_path / ".gitignore", "*.log\nbuild/\n")
    write(tmp_path / "sub" / ".indexerignore", "private.md\n")
    for rel in ("a.md", "x.log", "build/b.md", "sub/private.md", "sub/ok.py", ".hid/c.md", "README"):
        write(tmp_path / rel)
    write(tmp_path / "pic.mp3", b"ID3\x04")
    write(tmp_path / "blob", b"\x00\x01")
    write(tmp_path / "big.md", "x" * 50)
    source = FilesystemSource([tmp_path], max_file_size=40)
    assert source.kind_for("x/a.MD") == "markdown"
    assert source.kind_for("y.pdf") == "pdf"
    assert source.kind_for("Makefile") == "text"
    assert source.kind_for("p.mp3") is None
    assert source.kind_for("p.png") == "image" and source.kind_for("p.docx") == "docx"  # OCR, document readers
    accepted = {rel for rel in ("a.md", "sub/ok.py", "README") if source.accepts(tmp_path / rel)}
    assert accepted == {"a.md", "sub/ok.py", "README"}
    for rel in ("x.log", "build/b.md", "sub/private.md", ".hid/c.md", "pic.mp3", "blob", "big.md", "missing.md"):
        assert not source.accepts(tmp_path / rel), rel
    assert not source.accepts("/etc/passwd")
    assert {r.path for r in source.scan()} == {str((tmp_path / r).resolve()) for r in accepted}
    # the ignore cache notices edits to ignore files
    write(tmp_path / "sub" / ".indexerignore", "ok.py\n")
    future = time.time_ns() + 10_000_000
    os.utime(tmp_path / "sub" / ".indexerignore", ns=(future, future))
    assert source.accepts(tmp_path / "sub" / "private.md")
    assert not source.accepts(tmp_path / "sub" / "ok.py")


# ---------------------------------------------------------------------------------------------------- read


def test_read_sets_hash_kind_and_ref(tmp_path: Path) -> None:
    data = "\ufeff# Title\r\nbody\r\n".encode()
    write(tmp_path / "a.md", data)
    source = FilesystemSource([tmp_path])
    (ref,) = list(source.scan())
    doc = source.read(ref)
    assert doc.ref == ref
    assert doc.kind == "markdown"
    assert doc.text == "# Title\nbody\n"
    assert doc.content_hash == hashlib.sha256(data).hexdigest()


def test_read_invalid_text_under_a_bom(tmp_path: Path) -> None:
    write(tmp_path / "bad.txt", codecs.BOM_UTF8 + b"ok " * 4000 + b"\xc3\x28")  # past the 8 KiB sniff
    source = FilesystemSource([tmp_path])
    (ref,) = list(source.scan())
    with pytest.raises(SourceError, match=r"invalid UTF-8 at byte 12003 .*re-save the file or exclude it"):
        source.read(ref)


def test_read_vanished_file(tmp_path: Path) -> None:
    f = write(tmp_path / "a.md")
    source = FilesystemSource([tmp_path])
    (ref,) = list(source.scan())
    f.unlink()
    with pytest.raises(SourceError, match="vanished") as info:
        source.read(ref)
    assert info.value.path == ref.path


def test_read_file_grown_past_cap(tmp_path: Path) -> None:
    f = write(tmp_path / "a.txt", "x" * 10)
    source = FilesystemSource([tmp_path], max_file_size=20)
    (ref,) = list(source.scan())
    f.write_text("x" * 30)
    with pytest.raises(SourceError, match="exceeds max_file_size 20"):
        source.read(ref)


def test_read_permission_denied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "a.md")
    source = FilesystemSource([tmp_path])
    (ref,) = list(source.scan())

    def deny(path: str, flags: int, *args: object) -> int:
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr("plugins.filesystem.source.os.open", deny)
    with pytest.raises(SourceError, match="permission denied"):
        source.read(ref)


def test_read_refuses_paths_outside_roots_and_symlink_swaps(tmp_path: Path) -> None:
    outside = write(tmp_path / "outside.md", "secret")
    root = tmp_path / "root"
    f = write(root / "a.md")
    source = FilesystemSource([root])
    (ref,) = list(source.scan())
    with pytest.raises(SourceError, match="outside every configured root"):
        source.read(SourceRef(root=ref.root, path=str(outside), size=6, mtime_ns=0))
    f.unlink()
    f.symlink_to(outside)  # swapped for a symlink after the scan
    with pytest.raises(SourceError):
        source.read(ref)


def test_read_corrupt_and_real_pdf(tmp_path: Path) -> None:
    write(tmp_path / "bad.pdf", b"garbage bytes, not a PDF" * 10)
    write(tmp_path / "good.pdf", make_pdf(["alpha page", "beta page"]))
    source = FilesystemSource([tmp_path])
    refs = {r.rel_path: r for r in source.scan()}
    with pytest.raises(SourceError, match="corrupt"):
        source.read(refs["bad.pdf"])
    doc = source.read(refs["good.pdf"])
    assert doc.kind == "pdf" and len(doc.page_starts) == 2
    assert doc.text[doc.page_starts[1] :].startswith("beta page")


def test_reader_bug_becomes_source_error(tmp_path: Path) -> None:
    class Broken:
        kind: str = "text"
        extensions: tuple[str, ...] = (".txt",)

        def read(self, ref: SourceRef, data: bytes) -> Document:
            raise KeyError("boom")

    write(tmp_path / "a.txt")
    source = FilesystemSource([tmp_path], readers=[Broken()])
    (ref,) = list(source.scan())
    with pytest.raises(SourceError, match="text reader failed"):
        source.read(ref)


def test_scan_below_a_folder_follows_the_rules_of_the_whole_scan(tmp_path):
    """Per-path sync of a folder that appeared asks the source for what is below it: the same files a full scan
    yields there, with the ignore files of the folders above it, hidden names, globs and symlinks."""
    from indexer.core.paths import within

    root = tmp_path / "root"
    write(root / ".gitignore", "build/\n*.log\n")
    write(root / "docs" / ".indexerignore", "drafts/\n")
    write(root / "docs" / "a.md", "# A\n")
    write(root / "docs" / "run.log", "log line\n")
    write(root / "docs" / "drafts" / "b.md", "# B\n")
    write(root / "docs" / "build" / "c.md", "# C\n")
    write(root / "docs" / ".hidden" / "d.md", "# D\n")
    write(root / "docs" / "deep" / "e.txt", "e\n")
    write(tmp_path / "elsewhere" / "f.md", "# F\n")
    os.symlink(tmp_path / "elsewhere", root / "docs" / "linked")  # its target is outside the root: not indexed
    source = FilesystemSource([root], exclude=("**/*.txt",))
    assert source.scan_below(str(root / "docs")) is not None  # it declares the ability (the default is None)
    for folder in (root / "docs", root / "docs" / "deep", root):
        below = {r.path for r in source.scan_below(str(folder))}
        full = {r.path for r in source.scan() if within(r.path, str(folder.resolve()))}
        assert below == full, folder
    assert {Path(r.path).name for r in source.scan_below(str(root / "docs"))} == {"a.md"}
    assert list(source.scan_below(str(root / "docs" / "drafts"))) == []  # ignored by the folder above it
    assert list(source.scan_below(str(root / "docs" / ".hidden"))) == []
    assert list(source.scan_below(str(tmp_path / "elsewhere"))) == []  # outside every root


def test_names_that_are_not_utf8_are_reported_alone(tmp_path: Path) -> None:
    root = os.fsencode(tmp_path)
    for name in (b"/\xff\xfe.md", b"/sub\xe9/inner.md", b"/caf\xc3\xa9.md", b"/plain.md"):  # the third is UTF-8
        os.makedirs(os.path.dirname(root + name), exist_ok=True)
        with open(root + name, "wb") as fh:
            fh.write(b"some text\n")
    source = FilesystemSource([tmp_path])
    assert rels(source) == ["café.md", "plain.md"]
    bad = sorted((os.fsencode(p.path), p.code) for p in source.problems)
    assert bad == [(root + b"/sub\xe9", "bad_name"), (root + b"/\xff\xfe.md", "bad_name")]
    assert all("rename it" in p.reason for p in source.problems)

    odd = os.fsdecode(root + b"/\xff\xfe.md")
    assert source.ref_for(odd) is None and [p.code for p in source.problems[-1:]] == ["bad_name"]
    assert list(source.scan_below(os.fsdecode(root + b"/sub\xe9"))) == []
    os.unlink(root + b"/\xff\xfe.md")
    before = len(source.problems)
    assert source.ref_for(odd) is None and len(source.problems) == before  # gone: nothing to report
