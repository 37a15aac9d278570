"""Build retrieval test sets offline, from what a Debian machine has, in BEIR's layout (corpus.jsonl,
queries.jsonl, qrels.tsv), so levers tuned on SciFact can be checked on documents of another kind and style.

- ``manpages``: the installed manual pages (section 1 and 8). A page's NAME line is the query ("list directory
  contents"); the document is the rendered page without its NAME section, titled by the command name only
  (the Google Cloud SDK's thousands of generated pages left out).
- ``docstrings``: functions and methods of the Python standard library. The first line of the docstring is the
  query ("Return the canonical path of the specified filename"); the document is the function's source with its
  docstring removed, titled by its qualified name.

One relevant document per query (grade 1). Documents are sampled deterministically (a hash of their id), long
ones cut at ``--max-chars``; queries of fewer than 3 words, and queries shared by more than one document, are
left out. Nothing here is downloaded. Used by bench/retrieval_quality.py (pass the output folder as BEIR_DIR).

Usage:
  python bench/offline_sets.py manpages OUT [--docs 1000] [--queries 400] [--max-chars 2000]
  python bench/offline_sets.py docstrings OUT [--docs 1500] [--queries 400]
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import subprocess
import sys
import sysconfig
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

MAN_DIRS = ("/usr/share/man/man1", "/usr/share/man/man8")
# the Google Cloud SDK's reference (16,631 of this machine's 18,400 pages: one vendor's generated style) is left
# out, so that the set is the manual of a Debian system rather than of one tool
SKIP_PAGES = ("gcloud",)
NAME_LINE = re.compile(r"^\s*(?P<names>[^\n]+?)\s+(?:\\?-|\u2010|\u2212|—|–)+\s+(?P<what>.+)$")


def _rank(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _render(page: Path) -> str:
    env = dict(os.environ, MANWIDTH="100", MAN_KEEP_FORMATTING="0", LANG="C.UTF-8")
    try:
        out = subprocess.run(["man", "-l", "-E", "UTF-8", str(page)], capture_output=True, env=env, timeout=20,
                             check=False).stdout  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return ""
    text = out.decode("utf-8", "replace")
    return re.sub(r".\x08", "", text)  # overstrike bold/underline


def _split_name(text: str) -> tuple[str, str] | None:
    """(query, document without its NAME section) of a rendered page, or None."""
    lines = text.splitlines()
    try:
        start = next(i for i, ln in enumerate(lines) if ln.strip() == "NAME")
    except StopIteration:
        return None
    end = next((i for i in range(start + 1, len(lines)) if lines[i] and not lines[i][0].isspace()), len(lines))
    name = " ".join(ln.strip() for ln in lines[start + 1:end])
    m = NAME_LINE.match(name)
    if m is None:
        return None
    body_lines = lines[:start] + lines[end:]
    if body_lines and "General Commands" in body_lines[0] or body_lines and "(" in body_lines[0][:40]:
        body_lines = body_lines[1:]  # the page header repeats the name
    body = "\n".join(ln.rstrip() for ln in body_lines).strip()
    return m.group("what").strip(), re.sub(r"\n{3,}", "\n\n", body)


def manpages(max_docs: int, max_chars: int) -> Iterator[tuple[str, str, str, str]]:
    """(id, title, text, query) per page, up to ``max_docs`` in hash order."""
    pages = sorted((p for d in MAN_DIRS if Path(d).is_dir() for p in Path(d).iterdir()
                    if p.is_file() and not p.name.startswith(SKIP_PAGES)), key=lambda p: _rank(p.name))  # fmt: skip
    n = 0
    for page in pages:
        if n >= max_docs:
            return
        parts = _split_name(_render(page))
        if parts is None or len(parts[1]) < 200:
            continue
        command = page.name.split(".")[0]
        n += 1
        yield f"man-{page.name}", command, parts[1][:max_chars], parts[0]


def _first_line(doc: str) -> str:
    for para in doc.strip().split("\n\n"):
        return " ".join(para.split())
    return ""


def docstrings(max_docs: int, max_chars: int) -> Iterator[tuple[str, str, str, str]]:
    """(id, title, text, query) per documented function of the standard library."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    found: list[tuple[str, str, str, str]] = []
    for path in sorted(stdlib.rglob("*.py")):
        rel = path.relative_to(stdlib)
        if any(part in {"test", "tests", "idlelib", "site-packages", "lib2to3", "turtledemo"} for part in rel.parts):
            continue
        try:
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            continue
        module = ".".join(rel.with_suffix("").parts).removesuffix(".__init__")
        lines = source.splitlines()
        for node, qual in _functions(tree, module):
            doc = ast.get_docstring(node)
            if not doc or node.end_lineno is None:
                continue
            query = _first_line(doc)
            body_node = node.body[0]
            code = lines[node.lineno - 1:body_node.lineno - 1] + lines[(body_node.end_lineno or 0):node.end_lineno]
            text = "\n".join(code).strip()
            if len(text.splitlines()) < 3:
                continue
            found.append((f"py-{qual}", qual, text[:max_chars], query))
    found.sort(key=lambda row: _rank(row[0]))
    yield from found[:max_docs]


def _functions(tree: ast.AST, prefix: str) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]]:
    for node in getattr(tree, "body", []):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith("_"):
            yield node, f"{prefix}.{node.name}"
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            yield from _functions(node, f"{prefix}.{node.name}")


def build(kind: str, out: Path, max_docs: int, max_queries: int, max_chars: int) -> dict[str, int]:
    rows = list((manpages if kind == "manpages" else docstrings)(max_docs, max_chars))
    seen: Counter[str] = Counter(" ".join(q.casefold().split()) for *_, q in rows)
    out.mkdir(parents=True, exist_ok=True)
    queries = []
    with (out / "corpus.jsonl").open("w", encoding="utf-8") as corpus:
        for doc_id, title, text, query in rows:
            corpus.write(json.dumps({"_id": doc_id, "title": title, "text": text}) + "\n")
            if len(query.split()) >= 3 and seen[" ".join(query.casefold().split())] == 1:
                queries.append((doc_id, query))
    queries.sort(key=lambda row: _rank("q" + row[0]))
    queries = queries[:max_queries]
    with (out / "queries.jsonl").open("w", encoding="utf-8") as qf, (out / "qrels.tsv").open("w") as rf:
        rf.write("query-id\tcorpus-id\tscore\n")
        for n, (doc_id, query) in enumerate(queries):
            qf.write(json.dumps({"_id": f"q{n}", "text": query}) + "\n")
            rf.write(f"q{n}\t{doc_id}\t1\n")
    return {"documents": len(rows), "queries": len(queries)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=["manpages", "docstrings"])
    ap.add_argument("out", type=Path)
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--max-chars", type=int, default=2000)
    args = ap.parse_args()
    from indexer.models.native import machine_line

    print(machine_line(), file=sys.stderr, flush=True)  # what built the set (stdout: its JSON summary)
    print(json.dumps(build(args.kind, args.out, args.docs, args.queries, args.max_chars)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
