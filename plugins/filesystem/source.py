"""The filesystem source: finds indexable files under a set of root folders and reads them into documents.

Scanning yields :class:`~indexer.types.SourceRef` values with stat data only; file contents are read only to
sniff files without a known extension (first 8 KiB). What a scan skipped for a reason worth telling the user
(permission denied, too large, binary, symlink escaping the roots, symlink loop, missing root) is collected in
``FilesystemSource.problems`` (a fresh list per scan) and, if given, passed to the ``on_problem`` callback as
it happens. Files skipped on purpose (hidden, ignored, excluded, not included) are not problems.

``available()`` is False after a scan that could not list a root (code ``root_unavailable``): a caller must not
treat files under it as deleted, since an unmounted drive must not empty the index.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import logging
import operator
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from indexer.plugin_api import (
    BAD_NAME,
    ROOT_UNAVAILABLE,
    ConfigError,
    Document,
    Reader,
    ScanProblem,
    Source,
    SourceError,
    SourceRef,
    encodable,
    printable,
)
from plugins.filesystem.ignore import IGNORE_FILES, Globs, IgnoreLevel, IgnoreStack, load_ignore_level
from plugins.filesystem.isolation import ParsePool
from plugins.filesystem.reader_options import configure_readers
from plugins.filesystem.readers import TextReader
from plugins.filesystem.readers import looks_like_text as sniff_text
from plugins.filesystem.remote import RemoteRead

if TYPE_CHECKING:
    from indexer.plugin_api import Settings

logger = logging.getLogger(__name__)

DEFAULT_MAX_FILE_SIZE, DEFAULT_MAX_IMAGE_FILE_SIZE = 10 * 1024 * 1024, 64 * 1024 * 1024  # text; pictures
BAD_NAME_REASON = (
    "name is not valid UTF-8 (shown with \\x escapes) and cannot be stored in the index; rename it to a UTF-8 "
    "name (e.g. `convmv -f latin1 -t utf-8 --notest NAME`) to have it indexed"
)
SNIFF_BYTES = 8192

# Extensions that are never text; skipped without opening the file.
BINARY_EXTENSIONS = frozenset(
    {
        ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".ico", ".icns", ".webp", ".tif", ".tiff", ".psd", ".heic",
        ".avif", ".svg", ".eps", ".ai", ".raw", ".mp3", ".mp4", ".m4a", ".m4v", ".wav", ".flac", ".ogg",
        ".opus", ".aac", ".avi", ".mov", ".mkv", ".webm", ".wmv", ".flv", ".mid", ".midi", ".zip", ".gz",
        ".tgz", ".bz2", ".xz", ".7z", ".rar", ".tar", ".zst", ".lz4", ".lzma", ".cab", ".jar", ".war", ".ear",
        ".whl", ".egg", ".apk", ".ipa", ".exe", ".dll", ".so", ".dylib", ".o", ".obj", ".a", ".lib", ".ko",
        ".class", ".pyc", ".pyo", ".pyd", ".wasm", ".bin", ".dat", ".elf", ".db", ".sqlite", ".sqlite3",
        ".mdb", ".gguf", ".ggml", ".safetensors", ".pt", ".pth", ".ckpt", ".onnx", ".tflite", ".pb", ".npy",
        ".npz", ".pkl", ".pickle", ".joblib", ".parquet", ".arrow", ".feather", ".avro", ".orc", ".h5",
        ".hdf5", ".nc", ".faiss", ".index", ".woff", ".woff2", ".ttf", ".otf", ".eot", ".pfb", ".doc",
        ".docx", ".xls", ".xlsx", ".ppt", ".pptx", ".odt", ".ods", ".odp", ".epub", ".mobi", ".djvu", ".rtf",
        ".pages", ".numbers", ".key", ".iso", ".img", ".dmg", ".deb", ".rpm", ".msi", ".vmdk", ".qcow2",
        ".swp", ".swo", ".ds_store",
    }
)  # fmt: skip


def looks_like_text(path: str) -> bool:
    """True if the first 8 KiB look like text (see :func:`plugins.filesystem.readers.looks_like_text`)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        head = os.read(fd, SNIFF_BYTES)
    finally:
        os.close(fd)
    return sniff_text(head, complete=len(head) < SNIFF_BYTES)


@dataclass(frozen=True)
class _Pending:
    """A folder waiting to be listed: its path as walked, resolved path, path relative to ``root``, and the
    ignore rules in force above it."""

    walked: str
    real: str
    rel: str
    stack: IgnoreStack
    root: str


_NAME = operator.attrgetter("name")  # sort key for folder entries (a lambda costs a Python call per entry)


def _extension(name: str) -> str:
    """``os.path.splitext(name)[1].lower()`` for a file name without a leading dot (the scan skips those), minus
    splitext's generic path handling: it runs for every file of every scan."""
    dot = name.rfind(".")
    return name[dot:].lower() if dot > 0 else ""


def _is_relative_to(path: str, root: str) -> bool:
    if os.sep == "/":  # both absolute and normalised: a string prefix test is exact (and 10x cheaper)
        return path == root or path.startswith(root if root.endswith("/") else root + "/")
    return Path(path).is_relative_to(root)


class FilesystemSource(Source):
    """Indexable files under ``roots``.

    ``include``/``exclude`` are Git wildmatch globs relative to each root (``*.md``, ``docs/**``, ``build/``);
    with ``include`` set, only matching files are taken. ``.gitignore`` and ``.indexerignore`` files at any
    depth are honoured (see :mod:`plugins.filesystem.ignore`); hidden files and folders (leading dot,
    ``.git`` included) are skipped. Symlinks are followed when their target lies inside one of the roots and
    the rules of the target's own place (hidden names, ignore files, exclude globs) let it in.
    Files without a reader for their extension are taken as plain text when their first 8 KiB look like
    text; files for a text reader whose first 8 KiB do not (binary content under a text name) are skipped
    as ``binary`` problems, like files with a binary extension.
    """

    def __init__(
        self,
        roots: Sequence[Path | str],
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
        max_file_size: int = DEFAULT_MAX_FILE_SIZE,
        readers: Sequence[Reader] | None = None,
        max_image_file_size: int = DEFAULT_MAX_IMAGE_FILE_SIZE,
        follow_symlinks: bool = True,
        on_problem: Callable[[ScanProblem], None] | None = None,
        parse_timeout: float | None = 60.0,
        parse_memory_mb: int = 2048,
        parse_workers: int = 1,
    ) -> None:
        resolved: list[str] = []
        for root in roots:
            real = os.path.realpath(os.path.abspath(os.path.expanduser(os.fspath(root))))
            if real not in resolved:
                resolved.append(real)
        self.roots: tuple[str, ...] = tuple(resolved)
        self._root_set = frozenset(resolved)
        self.include = tuple(include)
        self.exclude = tuple(exclude)
        self.max_file_size, self.max_image_file_size = max_file_size, max_image_file_size
        self.follow_symlinks = follow_symlinks
        self.on_problem = on_problem
        self.problems: list[ScanProblem] = []
        self._globs = Globs(include, exclude)
        self._has_globs = self._globs.include is not None or self._globs.exclude is not None
        if readers is None:  # every registered reader (indexer.readers entry points), third-party ones included
            from indexer.plugin_api import load_readers

            readers = load_readers()
        chosen: Sequence[Reader] = readers
        self.readers: tuple[Reader, ...] = tuple(chosen)
        self._by_ext: dict[str, Reader] = {}
        for reader in self.readers:  # later readers win for a shared extension
            for ext in reader.extensions:
                self._by_ext[ext.lower()] = reader
        text_reader: Reader = TextReader()
        self._fallback: Reader = next((r for r in self.readers if r.kind == "text"), text_reader)
        self._ignore_cache: dict[str, tuple[tuple[tuple[int, int] | None, ...], IgnoreLevel | None]] = {}
        # Readers marked ``isolated`` (the document readers) parse in a worker process with these limits;
        # parse_timeout None parses them in this process (tests of the readers themselves). Up to
        # ``parse_workers`` files parse at once (``read`` is thread-safe), each in its own worker.
        self._worker = ParsePool(parse_timeout, parse_memory_mb, parse_workers) if parse_timeout is not None else None
        self._limits = (parse_timeout, parse_memory_mb)
        self.parallel_reads = parse_workers if parse_timeout is not None else 1

    @classmethod
    def from_settings(cls, roots: Sequence[Path], settings: Settings, readers: Sequence[Reader]) -> FilesystemSource:
        """The plugin factory (:class:`indexer.ports.SourceFactory`): include/exclude globs and the size cap come
        from the settings, ``settings.source_options`` may set ``follow_symlinks``."""
        options = dict(settings.source_options)
        follow = bool(options.pop("follow_symlinks", True))
        if options:
            raise ConfigError(
                f"unknown source_options for the filesystem source: {', '.join(sorted(options))}; "
                "it takes follow_symlinks"
            )
        return cls(
            roots,
            include=settings.include,
            exclude=settings.exclude,
            max_file_size=settings.max_file_size,
            max_image_file_size=settings.max_image_file_size,
            readers=configure_readers(readers, settings),
            follow_symlinks=follow,
            parse_timeout=settings.parse_timeout,
            parse_memory_mb=settings.parse_memory_mb,
            parse_workers=settings.parse_workers,
        )

    def __repr__(self) -> str:
        return f"FilesystemSource(roots={list(self.roots)!r})"

    # ----------------------------------------------------------------- helpers for watchers and the API

    def contains(self, path: str | os.PathLike[str]) -> bool:
        """Whether ``path``, with symlinks and ``..`` resolved, lies inside one of the roots."""
        return self._root_of(os.path.realpath(os.path.abspath(os.fspath(path)))) is not None

    def reader_for(self, path: str | os.PathLike[str]) -> Reader | None:
        """The reader for a path by its extension: unknown or missing extensions get the plain-text reader,
        known binary extensions None. Content is not looked at (see :meth:`accepts`)."""
        ext = os.path.splitext(os.fspath(path))[1].lower()
        reader = self._by_ext.get(ext)
        if reader is not None:
            return reader
        return None if ext in BINARY_EXTENSIONS else self._fallback

    def heavy_read(self, ref: SourceRef) -> bool:
        """Whether reading ``ref`` takes a parse worker (its reader is ``isolated``): the read-ahead keeps such
        reads in their own lane, so a text file is never queued behind them (:mod:`indexer.index.reads`)."""
        reader = self.reader_for(ref.path)
        return self._worker is not None and reader is not None and bool(getattr(reader, "isolated", False))

    def parse_job(self, ref: SourceRef, *, shared: bool = False) -> RemoteRead | None:
        """A heavy read for another machine (a Ray node: :mod:`plugins.filesystem.remote`), with the file's bytes
        read here unless ``shared``; None for a read that is not heavy."""
        reader = self.reader_for(ref.path)
        if reader is None or not self.heavy_read(ref) or not self.contains(ref.path):
            return None
        cap = self.size_cap(os.path.splitext(ref.path)[1].lower())[0]
        return RemoteRead(reader, ref, None if shared else self._read_bytes(ref.path), cap, *self._limits)

    def kind_for(self, path: str | os.PathLike[str]) -> str | None:
        """The reader kind (``markdown``, ``code``, ...) a path would be read with, by extension only."""
        reader = self.reader_for(path)
        return reader.kind if reader is not None else None

    def claims(self, path: str) -> bool:
        """Whether a change at ``path`` may concern this source (the port's "is this path mine?", by name only):
        inside a root with no hidden part below it, except an ignore file (its edit changes what is taken)."""
        root = next((r for r in self.roots if _is_relative_to(path, r)), None)
        if root is None:
            return False
        parts = os.path.relpath(path, root).split(os.sep)
        if parts == ["."]:
            return True
        if any(p.startswith(".") for p in parts[:-1]):
            return False
        return not parts[-1].startswith(".") or parts[-1] in IGNORE_FILES

    def accepts(self, path: str | os.PathLike[str]) -> bool:
        """Whether a scan would yield this path now (inside a root, not hidden, ignored or excluded, a
        regular file within the size cap with a reader or text content)."""
        return self.ref_for(path) is not None

    def ref_for(self, path: str | os.PathLike[str]) -> SourceRef | None:
        """The SourceRef a scan would yield for ``path`` now, or None (same rules as :meth:`scan`)."""
        absolute = os.path.abspath(os.fspath(path))
        real = os.path.realpath(absolute)
        if self._root_of(real) is None:
            return None
        walk_root = self._root_of(absolute) or self._root_of(real)
        assert walk_root is not None
        walked = absolute if self._root_of(absolute) else real
        if walked == walk_root:  # a root that is a file
            return self._named_ref(real, walked, walk_root)
        rel = os.path.relpath(walked, walk_root).replace(os.sep, "/")
        parts = rel.split("/")
        if any(part.startswith(".") for part in parts):
            return None
        stack = self._stack_in(walk_root, parts[:-1])
        if stack is None or stack.ignored(rel, False) or not self._globs.wanted_file(rel):
            return None
        if walked != real and self._at_target(real, False) is None:
            return None  # a link (or a linked folder on the way) to what the rules keep out
        return self._named_ref(real, walked, walk_root)

    def _stack_in(self, root: str, dirs: Sequence[str]) -> IgnoreStack | None:
        """The ignore rules in force for the entries of the folder ``root/dirs...``, or None when a folder on the
        way is ignored or excluded."""
        stack = IgnoreStack().push(self._cached_ignore_level(root, ""))
        directory = root
        for depth, part in enumerate(dirs):
            dir_rel = "/".join(dirs[: depth + 1])
            if stack.ignored(dir_rel, True) or self._globs.excluded_dir(dir_rel):
                return None
            directory = os.path.join(directory, part)
            stack = stack.push(self._cached_ignore_level(directory, dir_rel))
        return stack

    def _at_target(self, real: str, is_dir: bool) -> tuple[str, str, IgnoreStack] | None:
        """(root, path relative to it, rules in force in its folder) of a link's target ``real``, or None when the
        hidden names, ignore files or exclude globs of its own place keep it out (include globs ask the link's name)."""
        root = self._root_of(real)
        if root is None or real == root:
            return None if root is None else (root, "", IgnoreStack())
        rel = os.path.relpath(real, root).replace(os.sep, "/")
        parts = rel.split("/")
        stack = None if any(p.startswith(".") for p in parts) else self._stack_in(root, parts[:-1])
        if stack is None or stack.ignored(rel, is_dir):
            return None
        excluded = self._globs.excluded_dir(rel) if is_dir else self._globs.excluded_file(rel)
        return None if excluded else (root, rel, stack)

    def _named_ref(self, real: str, walked: str, walk_root: str) -> SourceRef | None:
        """:meth:`_ref_at` for a path that passed the rules, unless its name is not valid UTF-8 (a problem)."""
        if not encodable(walked) or not encodable(real):
            if os.path.lexists(walked):
                self._bad_name(walked)
            return None
        return self._ref_at(real, walked, walk_root, None)

    # ----------------------------------------------------------------------------------------- scanning

    def available(self) -> bool:
        """True when the last scan could list every root (see the module docstring)."""
        return not any(p.code == ROOT_UNAVAILABLE for p in self.problems)

    def scan(self) -> Iterator[SourceRef]:
        """Yield every indexable file once (by resolved path): roots in the given order, in each folder its
        files by name, then its subfolders by name.

        Real folders of every root are walked first; symlinked folders are entered afterwards and only if
        their target was not walked already (which also ends symlink loops)."""
        self.problems = []
        seen_files: set[str] = set()
        visited_dirs: set[tuple[int, int]] = set()
        deferred: list[_Pending] = []
        for root in self.roots:
            try:
                st = os.stat(root)
            except OSError as exc:
                self._problem(root, f"root unavailable ({exc.strerror}); check the path or mount", ROOT_UNAVAILABLE)
                continue
            if stat.S_ISREG(st.st_mode):
                ref = self._ref_at(root, root, root, st)
                if ref is not None and ref.path not in seen_files:
                    seen_files.add(ref.path)
                    yield ref
                continue
            if not stat.S_ISDIR(st.st_mode):
                self._problem(root, "root is neither a folder nor a regular file", ROOT_UNAVAILABLE)
                continue
            visited_dirs.add((st.st_dev, st.st_ino))
            yield from self._walk([_Pending(root, root, "", IgnoreStack(), root)], seen_files, visited_dirs, deferred)
        yield from self._walk_deferred(deferred, seen_files, visited_dirs)

    def scan_below(self, folder: str | os.PathLike[str]) -> Iterator[SourceRef]:
        """What :meth:`scan` would yield below ``folder`` (a folder inside a root), by the same rules (hidden
        names, ignore files of the folders above it, globs): per-path sync of a folder that appeared or moved."""
        absolute = os.path.abspath(os.fspath(folder))
        real = os.path.realpath(absolute)
        walk_root = self._root_of(absolute) or self._root_of(real)
        if walk_root is None or not os.path.isdir(real):
            return
        if not encodable(absolute) or not encodable(real):
            self._bad_name(absolute)
            return
        walked = absolute if self._root_of(absolute) else real
        rel = "" if walked == walk_root else os.path.relpath(walked, walk_root).replace(os.sep, "/")
        parts = rel.split("/") if rel else []
        if any(part.startswith(".") for part in parts):
            return
        if walked != real and self._at_target(real, True) is None:
            return  # a linked folder whose target the rules keep out
        stack = self._stack_in(walk_root, parts[:-1]) if parts else IgnoreStack()
        if stack is None or (parts and (stack.ignored(rel, True) or self._globs.excluded_dir(rel))):
            return
        st = os.stat(real)
        seen_files: set[str] = set()
        visited_dirs = {(st.st_dev, st.st_ino)}
        deferred: list[_Pending] = []
        yield from self._walk([_Pending(walked, real, rel, stack, walk_root)], seen_files, visited_dirs, deferred)
        yield from self._walk_deferred(deferred, seen_files, visited_dirs)

    def _walk_deferred(
        self, deferred: list[_Pending], seen_files: set[str], visited_dirs: set[tuple[int, int]]
    ) -> Iterator[SourceRef]:
        """Symlinked folders, entered after the real ones and only when their target was not walked already."""
        while deferred:
            link = deferred.pop(0)
            try:
                st = os.stat(link.real)
            except OSError:
                continue
            key = (st.st_dev, st.st_ino)
            if key in visited_dirs:
                logger.debug("not entering %s: its target %s was already scanned", link.walked, link.real)
                continue
            target = self._at_target(link.real, True)  # inside, the rules of the target's own place apply
            if target is not None:
                visited_dirs.add(key)
                yield from self._walk([_Pending(link.walked, link.real, target[1], target[2], target[0])],
                                      seen_files, visited_dirs, deferred)

    def _walk(
        self,
        pending: list[_Pending],
        seen_files: set[str],
        visited_dirs: set[tuple[int, int]],
        deferred: list[_Pending],
    ) -> Iterator[SourceRef]:
        while pending:
            current = pending.pop()
            stack = current.stack.push(load_ignore_level(current.walked, current.rel, IGNORE_FILES))
            entries = self._list(current.walked)
            # A re-run pays this loop for every file, so what holds for the whole folder is worked out once: whether
            # any ignore file or glob can reject a file here, the root owning its files, and the prefix that makes
            # a file's resolved path by concatenation (os.path.join and _root_of per file cost ~1.5 us each).
            filtered = bool(stack.levels) or self._has_globs
            owner = self._root_of(current.real) or current.root
            prefix = current.real.rstrip(os.sep) + os.sep
            subdirs: list[_Pending] = []
            for entry in entries:
                name = entry.name
                if name.startswith("."):
                    continue
                if not name.isascii() and not encodable(name):
                    self._bad_name(entry.path)  # reported alone; a folder's files with it
                    continue
                try:
                    is_link = entry.is_symlink()
                    if is_link:
                        found = self._follow(entry)
                        if found is None:
                            continue
                        real, st = found
                    else:  # inline: the path of nearly every entry, one stat (from the folder listing's cache)
                        real, st = prefix + name, entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    self._problem(entry.path, f"cannot stat ({exc.strerror})", "error")
                    continue
                if stat.S_ISREG(st.st_mode):
                    if real in seen_files:
                        continue
                    if filtered:
                        rel = f"{current.rel}/{name}" if current.rel else name
                        if stack.ignored(rel, False) or not self._globs.wanted_file(rel):
                            continue
                    if is_link:  # taken only when the rules of its target's own place take it too
                        ref = self._ref_at(real, entry.path, current.root, st) if self._at_target(real, False) else None
                    else:  # a file that is itself a root is owned by that root (see _root_of)
                        file_owner = real if real in self._root_set else owner
                        ref = self._file_ref(real, entry.path, st, file_owner, _extension(name))
                    if ref is not None:
                        seen_files.add(real)
                        yield ref
                elif stat.S_ISDIR(st.st_mode):
                    rel = f"{current.rel}/{name}" if current.rel else name
                    if stack.ignored(rel, True) or self._globs.excluded_dir(rel):
                        continue
                    if real in self.roots:
                        continue  # another root: walked on its own, with its own rules
                    child = _Pending(entry.path, real, rel, stack, current.root)
                    if is_link:
                        deferred.append(child)
                        continue
                    key = (st.st_dev, st.st_ino)
                    if key in visited_dirs:
                        continue
                    visited_dirs.add(key)
                    subdirs.append(child)
                else:
                    self._problem(entry.path, "not a regular file (device, socket or pipe)", "not_regular")
            pending.extend(reversed(subdirs))  # depth first, in name order

    def _list(self, folder: str) -> list[os.DirEntry[str]]:
        """The entries of ``folder`` by name; none (and a problem) when it cannot be listed."""
        try:
            with os.scandir(folder) as iterator:
                return sorted(iterator, key=_NAME)
        except PermissionError:
            self._problem(folder, "permission denied; grant read access or exclude the folder", "permission")
        except FileNotFoundError:
            pass  # vanished during the scan
        except OSError as exc:
            self._problem(folder, f"cannot list folder ({exc.strerror})", "error")
        return []

    def _follow(self, entry: os.DirEntry[str]) -> tuple[str, os.stat_result] | None:
        """The resolved path and stat of a symlink's target, or None (and a problem) when it is not to be
        followed: symlinks off, broken, a loop, or a target outside every root."""
        if not self.follow_symlinks:
            return None
        real = os.path.realpath(entry.path)
        try:
            st = os.stat(real)
        except OSError as exc:
            code = "symlink_loop" if exc.errno == errno.ELOOP else "broken_symlink"
            self._problem(entry.path, f"symlink cannot be resolved ({exc.strerror})", code)
            return None
        if self._root_of(real) is None:
            logger.debug("skipping %s: symlink target %s outside every root", entry.path, real)
            self._problem(entry.path, f"symlink target {real} is outside every root", "outside_root")
            return None
        return real, st

    def _ref_at(self, real: str, walked: str, walk_root: str, st: os.stat_result | None) -> SourceRef | None:
        """:meth:`_file_ref` for a file met outside the folder loop (a root that is a file, a symlink, ref_for)."""
        ext = os.path.splitext(real)[1].lower()
        return self._file_ref(real, walked, st, self._root_of(real) or walk_root, ext)

    def _file_ref(self, real: str, walked: str, st: os.stat_result | None, owner: str, ext: str) -> SourceRef | None:
        """Apply the per-file checks (stat, size, reader or text sniff) to a file that passed the rules.
        ``owner`` is the most specific root holding ``real``, ``ext`` its lower-case extension.

        Files no reader claims by extension are taken only if their head looks like text; nothing else is read
        (a no-change re-run stays stat-only). Binary content under a text reader's extension is found when the
        file is read (:meth:`read`) and skipped the same way, as ``binary``."""
        try:
            if st is None:
                st = os.stat(real)
            if not stat.S_ISREG(st.st_mode):
                return None
            known = ext in self._by_ext
            if not known and ext in BINARY_EXTENSIONS:
                self._problem(walked, "binary file type; no reader for it", "binary")
                return None
            cap, setting = self.size_cap(ext)
            if st.st_size > cap:
                self._problem(walked, f"{st.st_size} bytes exceeds {setting} {cap}; raise the limit or exclude the "
                              "file", "too_large")
                return None
            if not known and not looks_like_text(real):
                self._problem(walked, "binary content (not text in any encoding); not indexed", "binary")
                return None
        except FileNotFoundError:
            return None
        except PermissionError:
            self._problem(walked, "permission denied; grant read access or exclude the file", "permission")
            return None
        except OSError as exc:
            self._problem(walked, f"cannot stat or read ({exc.strerror})", "error")
            return None
        return SourceRef(owner, real, st.st_size, st.st_mtime_ns)

    def _root_of(self, real: str) -> str | None:
        """The most specific root containing ``real`` (an absolute, resolved path), or None."""
        best: str | None = None
        for root in self.roots:
            if _is_relative_to(real, root) and (best is None or len(root) > len(best)):
                best = root
        return best

    def _cached_ignore_level(self, directory: str, base: str) -> IgnoreLevel | None:
        signature: list[tuple[int, int] | None] = []
        for name in IGNORE_FILES:
            try:
                st = os.stat(os.path.join(directory, name))
                signature.append((st.st_mtime_ns, st.st_size))
            except OSError:
                signature.append(None)
        key = f"{directory}\0{base}"
        cached = self._ignore_cache.get(key)
        if cached is not None and cached[0] == tuple(signature):
            return cached[1]
        level = load_ignore_level(directory, base) if any(signature) else None
        self._ignore_cache[key] = (tuple(signature), level)
        return level

    def _bad_name(self, path: str) -> None:
        """A name that is not valid UTF-8: reported (failed, with the fix) and skipped, the rest of the scan goes
        on. The problem keeps the real path (it opens the file and matches the watcher's events)."""
        self._problem(path, BAD_NAME_REASON, BAD_NAME)

    def _problem(self, path: str, reason: str, code: str) -> None:
        problem = ScanProblem(path=path, reason=reason, code=code)
        logger.debug("scan skipped %s: %s", printable(path), reason)
        self.problems.append(problem)
        if self.on_problem is not None:
            self.on_problem(problem)

    # ------------------------------------------------------------------------------------------ reading

    def read(self, ref: SourceRef) -> Document:
        """Read the file once and extract its text; every failure raises SourceError(path, reason)."""
        path = ref.path
        if not self.contains(path):
            raise SourceError(path, "path is outside every configured root; add its folder as a root")
        reader = self.reader_for(path)
        if reader is None:
            raise SourceError(path, "binary file type; no reader for it")
        data = self._read_bytes(path)
        if getattr(reader, "reads_text", False) and not sniff_text(data[:SNIFF_BYTES], len(data) < SNIFF_BYTES):
            raise SourceError(path, "binary content (not text in any encoding); not indexed", code="binary")
        try:
            if self._worker is not None and getattr(reader, "isolated", False):
                doc = self._worker.read(reader, ref, data)
            else:
                doc = reader.read(ref, data)
        except SourceError:
            raise
        except Exception as exc:  # a reader bug or library error must not escape as something else
            raise SourceError(path, f"{reader.kind} reader failed ({type(exc).__name__}: {exc})") from exc
        return dataclasses.replace(doc, ref=ref, content_hash=hashlib.sha256(data).hexdigest())

    def close(self) -> None:
        """End the parse workers (after the reads in flight)."""
        if self._worker is not None:
            self._worker.close()

    def abort_reads(self) -> None:
        """End the parse workers now (a shutdown that must not wait for a long parse): reads in flight fail."""
        if self._worker is not None:
            self._worker.abort()

    def size_cap(self, ext: str) -> tuple[int, str]:
        """The most bytes a file with (lower-case) extension ``ext`` may have, and the setting that says so."""
        if getattr(self._by_ext.get(ext), "kind", None) == "image":  # a picture: a camera photo is large
            return self.max_image_file_size, "max_image_file_size"
        return self.max_file_size, "max_file_size"

    def _read_bytes(self, path: str) -> bytes:
        cap, setting = self.size_cap(os.path.splitext(path)[1].lower())
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            with os.fdopen(os.open(path, flags), "rb") as handle:
                st = os.fstat(handle.fileno())
                if not stat.S_ISREG(st.st_mode):
                    raise SourceError(path, "not a regular file")
                if st.st_size > cap:
                    raise SourceError(path, f"{st.st_size} bytes exceeds {setting} {cap}; raise it or exclude the file")
                data = handle.read(cap + 1)
        except SourceError:
            raise
        except FileNotFoundError as exc:
            raise SourceError(path, "file vanished before it could be read (deleted or renamed)") from exc
        except PermissionError as exc:
            raise SourceError(path, "permission denied; grant read access or exclude the file") from exc
        except IsADirectoryError as exc:
            raise SourceError(path, "is a folder, not a file") from exc
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # ELOOP from O_NOFOLLOW: replaced by a symlink since the scan
                raise SourceError(path, "file was replaced by a symlink since the scan; rescan") from exc
            raise SourceError(path, f"cannot read file ({exc.strerror or exc})") from exc
        if len(data) > cap:
            raise SourceError(path, f"file grew past {setting} {cap} while being read; raise the limit")
        return data
