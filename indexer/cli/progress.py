"""Progress of long commands (``index``, ``reindex``) drawn with rich on stderr; silent when stderr is not a
terminal or the output is ``--json``.

Two lines: files done of the total, and chunks embedded of those split so far, with the token rate. The
pipeline reports splitting every quarter second and embedding in steps of about a second of work
(``indexer.index.pipeline.EMBED_STEP_TOKENS``), so the second line moves within seconds of the start, inside the
first file, however large it is.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from indexer import ports


class BarProgress(ports.Progress):
    """The pipeline's :class:`indexer.ports.Progress`, drawn on a rich ``Progress``."""

    def __init__(self, bar: Progress, files_label: str = "files") -> None:
        self.bar = bar
        self.files = bar.add_task(files_label, total=None)
        self.chunks = bar.add_task("chunks embedded", total=None)
        self.tokens = 0
        self.split = 0  # chunks split so far: the chunk line's total
        self.started = time.monotonic()
        self.done = 0
        self.total: int | None = None
        self.nodes: TaskID | None = None  # the cluster's line, once a Ray cluster works for the run

    def files_total(self, n: int) -> None:
        self.total = n
        self.bar.update(self.files, total=n, completed=0)

    def file_done(self, path: str) -> None:
        self.done += 1
        self.bar.advance(self.files)

    def chunked(self, chunks: int) -> None:
        self.split += chunks
        self.bar.update(self.chunks, total=self.split)

    def cluster(self, work: Mapping[str, Any]) -> None:
        """A third line while a Ray cluster works for the run: nodes, workers and each node's rate."""
        rates = [f"{n['host']} {n['chars_per_s']:,} chars/s" + (f", {n['files']} docs" if n.get("files") else "")
                 for n in (work.get("per_node") or {}).values()]
        text = f"cluster: {work.get('workers', 0)} workers on {work.get('nodes', 0)} nodes"
        text += f" ({'; '.join(rates)})" if rates else ""
        if self.nodes is None:
            self.nodes = self.bar.add_task(text, total=None)
        else:
            self.bar.update(self.nodes, description=text)

    def embedded(self, chunks: int, tokens: int) -> None:
        self.tokens += tokens
        elapsed = time.monotonic() - self.started
        rate = f" ({self.tokens / elapsed:,.0f} tokens/s)" if elapsed > 0 else ""
        self.bar.update(self.chunks, advance=chunks, description=f"chunks embedded{rate}")


@contextmanager
def progress_bars(console: Console, as_json: bool, files_label: str = "files") -> Iterator[BarProgress]:
    """A :class:`BarProgress` shown while the block runs (only on a terminal, never with ``--json``)."""
    show = sys.stderr.isatty() and not as_json
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=not show,
        transient=True,
    ) as bar:
        yield BarProgress(bar, files_label)
