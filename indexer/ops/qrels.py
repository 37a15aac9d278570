"""Queries with the documents a user expects, read for `indexer eval`: JSONL, TSV or a BEIR folder.

* JSONL, one query a line: ``{"query": "...", "relevant": {"notes/a.md": 2, "b.md": 1}}`` (or a list of
  documents, grade 1 each); ``id`` is optional (default: the line number).
* TSV, one judgement a line: ``query<TAB>document[<TAB>grade]`` (grade 1 when absent); lines of one query text
  form one query.
* BEIR: a folder with ``queries.jsonl`` (``_id``, ``text``) and ``qrels/test.tsv`` (or ``--split``'s file, or
  ``qrels.tsv``): ``query-id<TAB>corpus-id<TAB>score`` with a header row.

A document is a path relative to the evaluation's root, or a glob (``*``, ``?``, ``[``) over such paths;
``template`` (e.g. ``{id}.md``) turns BEIR corpus ids into paths. Grades of 0 or less are kept as judged but
not relevant, as trec_eval counts them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from indexer.errors import InputError


@dataclass(frozen=True)
class Query:
    qid: str
    text: str
    grades: dict[str, float]  # document (path relative to the root, or a glob) -> grade

    @property
    def relevant(self) -> int:
        return sum(1 for g in self.grades.values() if g > 0)


def load(path: Path, template: str = "{id}", split: str = "test") -> list[Query]:
    """The queries of ``path`` (format by its form: a folder is BEIR, ``.tsv`` TSV, else JSONL)."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"queries file {path} not found; give a JSONL or TSV file, or a BEIR folder")
    if "{id}" not in template:
        raise InputError(f"--doc-template {template!r} must contain {{id}}, e.g. '{{id}}.md'")
    if path.is_dir():
        queries = _beir(path, split)
    elif path.suffix.lower() in (".tsv", ".tab"):
        queries = _tsv(path)
    else:
        queries = _jsonl(path)
    queries = [Query(q.qid, q.text, {template.format(id=d): g for d, g in q.grades.items()}) for q in queries]
    if not any(q.relevant for q in queries):
        raise InputError(f"{path}: no query has a relevant document (grade > 0); see docs/search.md for the format")
    return queries


def _grade(value: Any, where: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InputError(f"{where}: grade {value!r} is not a number") from None


def _jsonl(path: Path) -> list[Query]:
    out: list[Query] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise InputError(f"{where}: not JSON ({exc}); one object a line, see docs/search.md") from exc
        text, relevant = row.get("query") if isinstance(row, dict) else None, row.get("relevant")
        if not isinstance(text, str) or not text.strip() or relevant is None:
            raise InputError(f'{where}: needs "query" (text) and "relevant" (documents or {{document: grade}})')
        grades = ({str(d): _grade(g, where) for d, g in relevant.items()} if isinstance(relevant, dict)
                  else {str(d): 1.0 for d in ([relevant] if isinstance(relevant, str) else relevant)})
        out.append(Query(str(row.get("id", n)), text, grades))
    return out


def _tsv(path: Path) -> list[Query]:
    by_text: dict[str, dict[str, float]] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) < 2 or len(parts) > 3:
            raise InputError(f"{path}:{n}: expected query<TAB>document[<TAB>grade], got {len(parts)} field(s)")
        grade = _grade(parts[2], f"{path}:{n}") if len(parts) == 3 else 1.0
        by_text.setdefault(parts[0].strip(), {})[parts[1].strip()] = grade
    return [Query(str(i), text, grades) for i, (text, grades) in enumerate(by_text.items(), 1)]


def _beir(folder: Path, split: str) -> list[Query]:
    qrels_file = next((p for p in (folder / "qrels" / f"{split}.tsv", folder / "qrels.tsv") if p.is_file()), None)
    if qrels_file is None or not (folder / "queries.jsonl").is_file():
        raise InputError(f"{folder}: a BEIR folder needs queries.jsonl and qrels/{split}.tsv (or qrels.tsv)")
    texts = {}
    for line in (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            texts[str(row["_id"])] = str(row["text"])
    grades: dict[str, dict[str, float]] = {}
    for n, line in enumerate(qrels_file.read_text(encoding="utf-8").splitlines()):
        parts = line.split("\t")
        if n == 0 and not parts[-1].strip().lstrip("-").isdigit():
            continue  # the header row
        if len(parts) >= 3:
            grades.setdefault(parts[0], {})[parts[1]] = _grade(parts[2], f"{qrels_file}:{n + 1}")
    missing = sorted(set(grades) - set(texts))
    if missing:
        raise InputError(f"{qrels_file}: queries {', '.join(missing[:5])} are not in queries.jsonl")
    return [Query(qid, texts[qid], g) for qid, g in grades.items()]
