"""Ignore rules: ``.gitignore`` / ``.indexerignore`` files at any depth plus the user's include/exclude globs.

All patterns use Git's wildmatch syntax (via ``pathspec``). An ignore file applies to the subtree of the
directory it sits in, with patterns relative to that directory. Precedence follows Git: a deeper file
overrides a shallower one, and within one directory ``.indexerignore`` is read after ``.gitignore`` (so it can
re-include what Git ignores with ``!pattern``); inside each file the last matching pattern wins. As in Git, a
file inside an ignored directory cannot be re-included (the directory is never entered).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass

import pathspec

logger = logging.getLogger(__name__)

IGNORE_FILES = (".gitignore", ".indexerignore")


@dataclass(frozen=True)
class IgnoreLevel:
    """The ignore patterns of one directory: ``base`` is its path relative to the root ("" for the root)."""

    base: str
    spec: pathspec.GitIgnoreSpec


class IgnoreStack:
    """The ignore levels in force for a directory, root first. Immutable: ``push`` returns a new stack."""

    __slots__ = ("levels",)

    def __init__(self, levels: tuple[IgnoreLevel, ...] = ()) -> None:
        self.levels = levels

    def push(self, level: IgnoreLevel | None) -> IgnoreStack:
        return self if level is None else IgnoreStack((*self.levels, level))

    def ignored(self, rel: str, is_dir: bool) -> bool:
        """Whether ``rel`` (POSIX path relative to the root) is ignored by the ignore files."""
        decision = False
        for level in self.levels:
            if level.base:
                if not rel.startswith(level.base + "/"):
                    continue
                sub = rel[len(level.base) + 1 :]
            else:
                sub = rel
            result = level.spec.check_file(sub + "/" if is_dir else sub)
            if result.include is not None:
                decision = bool(result.include)
        return decision


def load_ignore_level(directory: str, base: str, names: Sequence[str] = IGNORE_FILES) -> IgnoreLevel | None:
    """Read the ignore files in ``directory`` (absolute); None when it has none. Unreadable files are logged
    and skipped (a broken ignore file must not stop a scan)."""
    lines: list[str] = []
    for name in names:
        path = os.path.join(directory, name)
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                lines.extend(handle.read().splitlines())
        except FileNotFoundError:
            continue
        except OSError as exc:
            logger.warning("cannot read ignore file %s: %s", path, exc)
            continue
    if not lines:
        return None
    return IgnoreLevel(base=base, spec=pathspec.GitIgnoreSpec.from_lines(lines))


class Globs:
    """The user's include/exclude globs (wildmatch, relative to the root)."""

    def __init__(self, include: Sequence[str] = (), exclude: Sequence[str] = ()) -> None:
        self.include = pathspec.GitIgnoreSpec.from_lines(list(include)) if include else None
        self.exclude = pathspec.GitIgnoreSpec.from_lines(list(exclude)) if exclude else None

    def excluded_dir(self, rel: str) -> bool:
        return self.exclude is not None and bool(self.exclude.match_file(rel + "/"))

    def excluded_file(self, rel: str) -> bool:
        return self.exclude is not None and bool(self.exclude.match_file(rel))

    def wanted_file(self, rel: str) -> bool:
        if self.exclude is not None and self.exclude.match_file(rel):
            return False
        return self.include is None or bool(self.include.match_file(rel))
