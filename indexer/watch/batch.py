"""Turning a stream of file-system changes into batches of paths to sync: pure logic, clock and stat injected.

Rules (each one answers a pitfall of watching folders, see docs/watch.md):

- **At once.** A path that is known complete (a close-after-write, a file moved in, a folder created or moved in)
  is ready immediately; a batch leaves as soon as events pause for ``gather`` seconds (a few tens of ms, so
  an editor's temp + rename save is one batch) or a ready path has waited ``max_gather``.
- **Still being written.** A path changed without a close (polling observers, writers that keep the file open)
  waits until its size and mtime stay the same for ``settle`` seconds. Small files are not delayed: they are
  closed within microseconds of their first event.
- **Briefly gone.** A path that disappeared (deleted, moved away) waits ``grace`` seconds before it counts as
  deleted: editors rename the original aside and write a new one (vim's backup dance), and an event bringing it
  back within the grace turns the deletion into an ordinary change.
- **Editor temp files** (``*~``, ``*.swp``, ``4913``, ``#x#``, ``*.tmp`` ...) also wait ``grace``: most are gone
  by then and cost nothing; one that stays is indexed like any other file.
- **Prefixes.** A ready folder (created, moved in, deleted, moved out) is synced as a whole: paths under it in
  the same batch are dropped. A folder that appeared waits ``settle`` and then while files under it are pending
  (watchdog reports the files of a new or moved-in folder one by one): they go in paced batches, and the folder
  pass that follows (for anything the events missed) finds them unchanged. An ignore-file edit syncs its
  folder, so newly ignored files lose their points and newly included ones are indexed.
- **Coalescing.** Events for a pending path merge into one entry that keeps the time of its first unsynced
  change (for the freshness figure). While a batch runs, new events collect into the next one.
- **Sized by cost.** Every ready path has an estimated cost (:class:`CostModel`: a per-path and a per-byte
  term scaled by what recent batches measured, or what the path itself cost last time). A batch holds the
  oldest ready path, then the ``fresh_lane`` most recently changed ones, then the oldest others (the files of a
  folder that appeared after every other change), while the estimates add up to ``target_seconds`` (at most
  ``max_paths``); a path that alone costs more goes alone. So
  the first batch after an idle period is as short as any, and an edit made during a burst of thousands waits
  for one short batch, not for the burst.
- **Rate limit.** A path synced at a cost ``c`` is not synced again before ``c * (1 / hot_share - 1)`` has passed
  (a file rewritten or appended continuously gets at most ``hot_share`` of the worker's time; its changes
  coalesce meanwhile), so it cannot starve the others.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from enum import Enum

IGNORE_FILE_NAMES = (".gitignore", ".indexerignore")

# Names editors and tools write for a moment next to the real file (temp, swap, backup, lock, test files).
TRANSIENT_PATTERNS = (
    "*~",
    "*.swp",
    "*.swo",
    "*.swx",
    "*.tmp",
    "*.temp",
    "*.part",
    "*.crdownload",
    "*.kate-swp",
    "4913",
    "#*#",
    ".#*",
    ".~lock.*#",
    ".goutputstream-*",
    "*___jb_tmp___",
    "*___jb_old___",
)

Stat = tuple[int, int]  # (size, mtime_ns)
StatFn = Callable[[str], "Stat | None"]


class What(Enum):
    """What an event says about a path."""

    WRITE = "write"  # created or modified: content may still change
    CLOSED = "closed"  # written and closed, or moved in whole: content complete
    GONE = "gone"  # deleted or moved away: may come back within the grace
    FOLDER = "folder"  # a folder appeared (created or moved in): sync its subtree


def stat_of(path: str) -> Stat | None:
    """(size, mtime_ns) of ``path`` without following a final symlink; None when it does not exist."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns)


def is_transient(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in TRANSIENT_PATTERNS)


@dataclass
class _Entry:
    path: str
    what: What
    first_seen: float
    last_event: float
    stat: Stat | None = None
    transient: bool = False


@dataclass(frozen=True)
class Batch:
    """Paths to sync together. ``first_seen`` maps each synced path to the time of its first unsynced change
    (several event paths can fold into one synced folder: it keeps the earliest); ``sizes`` the bytes each
    event path had when the batch was taken (what :meth:`CostModel.learn` needs)."""

    paths: tuple[str, ...]
    first_seen: dict[str, float] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    costs: dict[str, float] = field(default_factory=dict)  # estimated seconds per event path
    going_on: tuple[str, ...] = ()  # large files part-written by an earlier batch (ChangeBatcher.go_on)

    @property
    def estimate(self) -> float:
        return sum(self.costs.values())

    def __len__(self) -> int:
        return len(self.paths)


@dataclass(frozen=True)
class BatchTiming:
    """Tunables, in seconds (and a count)."""

    gather: float = 0.03
    max_gather: float = 0.15
    settle: float = 0.3
    grace: float = 0.25
    max_paths: int = 256
    target_seconds: float = 0.5
    fresh_lane: int = 4
    # At most this share of the worker's time for one path changing continuously: an edit elsewhere that lands
    # while such a path syncs waits for it, so this share is about the fraction of other edits that wait
    # (a 5 MB log appended every 100 ms cost 7-16 s a sync on a busy 2-core machine: synced every 4-8 min).
    hot_share: float = 0.03
    # Syncs cheaper than this never hold a path back: a file edited again and again by hand (each sync ~0.1 s on a
    # busy machine, 0.7 s once beside a log chunked in a reader thread) must not wait; only a path costing a
    # second or more (the watcher's slow-file threshold) is rate-limited.
    hot_min_seconds: float = 1.0


class CostModel:
    """Estimated seconds to sync a path: ``(per_path + size * per_byte) * scale``, where ``scale`` follows what
    batches measured (geometric smoothing), or what the same path cost last time (scaled by its growth). Pure
    logic: the watcher reports each batch's elapsed time to :meth:`learn`."""

    PER_PATH = 0.01  # stat, read, plan, commit
    # New text to chunk and embed: ~10 KB/s (measured: 118 KB of Markdown in 21 s, f16 MiniLM, busy 2-core
    # machine). A path never synced by this watcher is estimated as new text: a burst of new files is what
    # must not make a long batch; an edit re-embeds only changed chunks and then costs what it cost last time.
    PER_BYTE = 1e-4
    SCALE_RANGE = (0.5, 20.0)  # what measured batches may do to the guess (never far below new-text cost)
    REMEMBERED = 10_000

    def __init__(self) -> None:
        self.scale = 1.0
        self._known: dict[str, tuple[int, float]] = {}  # path -> (size, seconds) of its last sync

    def estimate(self, path: str, size: int) -> float:
        base = (self.PER_PATH + size * self.PER_BYTE) * self.scale
        known = self._known.get(path)
        if known is None:
            return base
        last_size, seconds = known
        return seconds * max(1.0, size / last_size) if last_size else seconds

    def learn(self, costs: dict[str, float], sizes: dict[str, int], elapsed: float) -> dict[str, float]:
        """Take a batch's measured ``elapsed`` seconds (``costs``: what was estimated per path); returns the
        seconds attributed to each path (in proportion to its estimate)."""
        estimated = sum(costs.values())
        if estimated <= 0 or elapsed <= 0:
            return {}
        ratio = min(4.0, max(0.25, elapsed / estimated))  # one outlier (a huge file re-read) moves it 2x at most
        low, high = self.SCALE_RANGE
        self.scale = min(high, max(low, self.scale * ratio**0.5))
        shares = {path: elapsed * cost / estimated for path, cost in costs.items()}
        for path, seconds in shares.items():
            self._known.pop(path, None)
            self._known[path] = (sizes.get(path, 0), seconds)
        while len(self._known) > self.REMEMBERED:
            del self._known[next(iter(self._known))]
        return shares


class ChangeBatcher:
    """Pending changes and the rules deciding when they are ready (not thread-safe: the watcher locks it)."""

    def __init__(self, timing: BatchTiming | None = None, stat: StatFn = stat_of) -> None:
        self.timing = timing or BatchTiming()
        self._stat = stat
        self._pending: dict[str, _Entry] = {}
        self._last_event = float("-inf")
        self.costs = CostModel()
        self._not_before: dict[str, float] = {}  # rate limit: path -> earliest time it may be synced again
        self._read_costs: dict[str, float] = {}  # large files still written slice by slice: their read's cost
        self._going_on: set[str] = set()  # large files part-written: their next slices (see go_on)

    def __len__(self) -> int:
        return len(self._pending)

    def paths(self) -> list[str]:
        return sorted(self._pending)

    # -- input ---------------------------------------------------------------------------------------
    def note(self, path: str, what: What, now: float, first_seen: float | None = None) -> None:
        """Record an event for ``path`` (absolute, normalized) at time ``now``. A change of a large file whose slices
        are still going on charges its read's rate limit now (:meth:`charge_reads`): its next version waits."""
        seconds = self._read_costs.pop(path, None)
        if seconds is not None:
            self.hold_back(path, seconds, now)
        self._record(path, what, now, first_seen)

    def _record(self, path: str, what: What, now: float, first_seen: float | None = None) -> None:
        self._last_event = max(self._last_event, now)
        self._going_on.discard(path)  # changed: read again, at its cost
        entry = self._pending.get(path)
        stat = self._stat(path) if what is What.WRITE else None
        if entry is None:
            self._pending[path] = _Entry(
                path,
                what,
                first_seen if first_seen is not None else now,
                now,
                stat,
                is_transient(os.path.basename(path)),
            )
            return
        if first_seen is not None:
            entry.first_seen = min(entry.first_seen, first_seen)
        entry.last_event = now
        if entry.what is What.FOLDER and what is not What.GONE:
            return  # a folder sync covers whatever else happens to it
        entry.what = what
        entry.stat = stat

    def go_on(self, path: str, now: float, first_seen: float | None = None) -> None:
        """A large file the last batch part-wrote (``IndexReport.unfinished``): ready at once for its next slices,
        keeping the time of its change (freshness counts until it is all written). Left out of the cost model:
        estimated at nothing, it joins the next batch, whose small changes the writer writes first, and then
        about a second of the file's slices (indexer.index.large)."""
        self._record(path, What.CLOSED, now, first_seen)
        self._going_on.add(path)

    def delay_of(self, path: str, what: What) -> float:
        """How long after its event a change of this kind is ready at the earliest (for waking the worker)."""
        t = self.timing
        if what is What.GONE or is_transient(os.path.basename(path)):
            return t.grace
        if what is What.WRITE:
            return t.settle
        return t.gather

    def requeue(self, batch: Batch, now: float) -> None:
        """Put a batch that could not be synced back (ready at once, keeping its first-seen times)."""
        self._going_on.update(p for p in batch.going_on if p not in self._pending)
        for path in batch.paths:
            entry = self._pending.get(path)
            first = batch.first_seen.get(path, now)
            if entry is None:
                self._pending[path] = _Entry(path, What.CLOSED, first, float("-inf"), None, False)
            else:
                entry.first_seen = min(entry.first_seen, first)

    # -- output --------------------------------------------------------------------------------------
    def _ready_at(self, entry: _Entry, now: float) -> float:
        """When ``entry`` becomes ready (<= now: ready): its own rule, and not before its rate limit allows."""
        ready = self._rule_ready_at(entry, now)
        if entry.what is not What.GONE and self._not_before:
            return max(ready, self._not_before.get(entry.path, ready))
        return ready

    def _rule_ready_at(self, entry: _Entry, now: float) -> float:
        """When ``entry`` becomes ready by its kind of change. May stat the file (settling writes)."""
        t = self.timing
        if entry.transient or entry.what is What.GONE:
            return entry.last_event + t.grace
        if entry.what is What.CLOSED:
            return entry.last_event
        if entry.what is What.FOLDER:  # may still be filling: its files' events come first
            return entry.last_event + t.settle
        # WRITE: ready once size and mtime held still for `settle` seconds.
        due = entry.last_event + t.settle
        if due > now:
            return due
        current = self._stat(entry.path)
        if current == entry.stat:
            return due
        entry.stat = current  # still changing: wait another settle period from now
        entry.last_event = now
        return now + t.settle

    def next_due(self, now: float) -> float | None:
        """The earliest time something may be ready (None: nothing pending). Cheap enough to call per wake-up."""
        if not self._pending:
            return None
        earliest = min(self._ready_at(e, now) for e in self._pending.values())
        if earliest <= now:
            return max(
                now, min(self._last_event + self.timing.gather, self._oldest_ready(now) + self.timing.max_gather)
            )
        return earliest

    def _oldest_ready(self, now: float) -> float:
        return min((e.first_seen for e in self._pending.values() if self._ready_at(e, now) <= now), default=now)

    def take(self, now: float, max_paths: int | None = None) -> Batch | None:
        """The next batch if one is due at ``now``; its paths leave the pending set. Its paths' estimated costs
        add up to ``target_seconds`` at most, unless its first path alone costs more."""
        due = self.next_due(now)
        if due is None or due > now:
            return None
        ready = [e for e in self._pending.values() if self._ready_at(e, now) <= now]
        chosen, costs, sizes = self._choose(ready, max_paths or self.timing.max_paths)
        going_on = tuple(e.path for e in chosen if e.path in self._going_on)
        for entry in chosen:
            del self._pending[entry.path]
            self._going_on.discard(entry.path)
        return replace(_fold(chosen, sizes, costs), going_on=going_on)

    def learn(self, batch: Batch, elapsed: float, now: float, charged: dict[str, float] | None = None) -> None:
        """A batch took ``elapsed`` seconds, ending at ``now``: refine the cost model and rate-limit its costly
        paths (one changing continuously gets at most ``hot_share`` of the time). ``charged``: the seconds the
        batch's trace charged to each file it synced (``IndexReport.held``); the rate limit goes by them where
        known, not by a share of the batch's time (which holds its waits and its neighbours' work: a note synced
        beside a slow read would be held back for half a minute)."""
        shares = self.costs.learn(batch.costs, batch.sizes, elapsed)
        for path in [p for p, until in self._not_before.items() if until <= now]:
            del self._not_before[path]
        for path, seconds in shares.items():
            self.hold_back(path, seconds if charged is None else charged.get(path, seconds), now)

    def hold_back(self, path: str, seconds: float, now: float) -> None:
        """Rate-limit ``path``, which cost ``seconds`` (a sync, or a read left in the background): a file that
        costs that much and changes all the time gets at most ``hot_share`` of the time."""
        t = self.timing
        if seconds >= t.hot_min_seconds:
            until = now + seconds * (1.0 / t.hot_share - 1.0)
            self._not_before[path] = max(self._not_before.get(path, until), until)

    def charge_reads(self, reads: dict[str, float], unfinished: set[str], now: float) -> None:
        """Rate-limit the paths read in the background (``IndexReport.read_before``: seconds each) as costly paths.
        A large file whose version is still written slice by slice (``unfinished``) keeps its read's cost until its
        last slice or its next change (:meth:`note`), whichever comes first: its slices go on at once (the read is
        paid; holding them back only kept the version read out of search for ~30x the read's time), and a file
        that keeps changing is still rate-limited."""
        for path, seconds in reads.items():
            self._read_costs[path] = max(self._read_costs.get(path, 0.0), seconds)
        for path in [p for p in self._read_costs if p not in unfinished]:
            self.hold_back(path, self._read_costs.pop(path), now)

    def held_back(self, now: float) -> list[str]:
        """Pending paths waiting for their rate limit (status)."""
        return sorted(p for p in self._pending if self._not_before.get(p, now) > now)

    def _has_pending_below(self, folder: str) -> bool:
        return _has_pending_below_impl(self._pending, folder)

    def take_all(self) -> Batch:
        """Every pending path, ready or not (for persisting the queue on shutdown)."""
        entries = list(self._pending.values())
        self._pending.clear()
        return _fold(entries)

    def _choose(self, ready: list[_Entry], limit: int) -> tuple[list[_Entry], dict[str, float], dict[str, int]]:
        """The entries of the next batch with their estimated costs and sizes: the oldest, the fresh lane, then
        the oldest others, while the estimates fit ``target_seconds`` (the first one always goes)."""
        # A folder sync can be huge: files go first in paced batches, a folder pass once nothing is pending below.
        files = [e for e in ready if e.what is not What.FOLDER]
        ready = files or [e for e in ready if not self._has_pending_below(e.path)]
        # Files of a folder that appeared (a burst: a copy, a clone, an unpacked archive) fill in behind every
        # other change: an edit made during the burst waits for one short batch, not for the files before it.
        folders = {e.path for e in self._pending.values() if e.what is What.FOLDER}
        if folders:
            bulk = [e for e in ready if _under_any(e.path, folders)]
            singles = [e for e in ready if not _under_any(e.path, folders)]
            order = self._lane_order(singles) + self._lane_order(bulk)
        else:
            order = self._lane_order(ready)
        chosen: list[_Entry] = []
        costs: dict[str, float] = {}
        sizes: dict[str, int] = {}
        total, passed = 0.0, 0
        for entry in order:
            if len(chosen) >= limit or passed > limit:
                break
            size = self._size(entry)
            if entry.path in self._going_on:
                cost = 0.0  # its slices go after the others, for about a second (left out of the cost model)
            elif entry.what is What.FOLDER:
                cost = self.timing.target_seconds
            else:
                cost = self.costs.estimate(entry.path, size)
            if chosen and total + cost > self.timing.target_seconds:
                passed += 1
                continue  # a cheaper one further on may still fit
            chosen.append(entry)
            costs[entry.path], sizes[entry.path] = cost, size
            total += cost
        return chosen, costs, sizes

    def _lane_order(self, entries: list[_Entry]) -> list[_Entry]:
        """The oldest, then the ``fresh_lane`` newest (newest first), then the oldest others."""
        by_age = sorted(entries, key=_AGE)
        lane = min(self.timing.fresh_lane, max(0, len(by_age) - 1))
        return by_age[:1] + by_age[len(by_age) - lane :][::-1] + by_age[1 : len(by_age) - lane]

    def _size(self, entry: _Entry) -> int:
        if entry.what is What.GONE:
            return 0
        stat = entry.stat if entry.stat is not None else self._stat(entry.path)
        return stat[0] if stat is not None else 0


def _AGE(entry: _Entry) -> float:  # noqa: N802 - a sort key, named like a constant
    return entry.first_seen


def _under_any(path: str, folders: set[str]) -> bool:
    """Whether ``path`` lies below one of ``folders`` (by its ancestors: no scan of the set)."""
    parent = os.path.dirname(path)
    while parent and parent != path:
        if parent in folders:
            return True
        path, parent = parent, os.path.dirname(parent)
    return False


def _has_pending_below_impl(pending: dict[str, _Entry], folder: str) -> bool:
    prefix = folder.rstrip(os.sep) + os.sep
    return any(p.startswith(prefix) for p in pending)


def _sync_path(entry: _Entry) -> str:
    """The path to sync for an entry: an ignore file's folder (its rules changed), else the path itself."""
    if os.path.basename(entry.path) in IGNORE_FILE_NAMES:
        return os.path.dirname(entry.path)
    return entry.path


def _fold(
    entries: Iterable[_Entry], sizes: dict[str, int] | None = None, costs: dict[str, float] | None = None
) -> Batch:
    """Map entries to sync paths, keep the earliest first-seen per path, drop paths under another one."""
    first: dict[str, float] = {}
    for entry in entries:
        path = _sync_path(entry)
        first[path] = min(first.get(path, entry.first_seen), entry.first_seen)
    kept = drop_nested(first)
    folded: dict[str, float] = {}
    for path, seen in first.items():
        owner = next((k for k in _ancestors_or_self(path) if k in kept), path)
        folded[owner] = min(folded.get(owner, seen), seen)
    return Batch(tuple(sorted(kept)), {p: folded[p] for p in kept}, dict(sizes or {}), dict(costs or {}))


def drop_nested(paths: Iterable[str]) -> set[str]:
    """The paths not lying under another path of the set (a folder sync covers its subtree)."""
    unique = set(paths)
    return {p for p in unique if not any(a in unique for a in _ancestors_or_self(p)[1:])}


def _ancestors_or_self(path: str) -> list[str]:
    out = [path]
    parent = os.path.dirname(path)
    while parent and parent != path:
        out.append(parent)
        path, parent = parent, os.path.dirname(parent)
    return out
