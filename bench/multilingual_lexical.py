"""A multilingual yardstick for the lexical analyzer, built offline: lexical nDCG@10 per language, per analyzer.

Sets (self-labelled, like bench/offline_sets.py's English ``manpages``): Debian's translated manual pages
(``manpages-zh``, ``manpages-ja``, ``manpages-de``/``-fr``/... under /usr/share/man/<lang>/man{1,5,8}); a page's
NAME line description is the query, the page (rendered, its NAME section removed, cut at ``--max-chars``) the
one relevant document, titled by its command name; queries shared by two pages and very short ones are left out.
English is /usr/share/man/man{1,8}. Debian ships none in Thai, Arabic or Hindi: ``--handwritten FILE.json``
(``{"lang": [{"id", "title", "text", "query"}, ...]}``: each query answered by its own document) adds such sets.

Ranking: SQLite FTS5 BM25 with the FAISS store's settings (k1 1.2, b 0.75, title x2, the query's terms OR-ed),
over whole pages rather than chunks, so the figures compare analyzers, not the product's end-to-end quality.

Analyzers: ``v1`` (indexer <= 0.4: Python ``re`` words, FTS5 ``unicode61``), ``v2`` and ``v3`` (the product's:
:mod:`indexer.search.analyzer`; v3 stems each document as its detected language and tells a query's language
among the set's, as the stores do), ``icu`` (ICU word break with its dictionaries, icu4py, NFKC + casefold, the
same stopwords and stemmer for Latin words: the dictionary reference), ``jieba`` (Chinese, search mode) and
``janome`` (Japanese) where installed. These are bench-only packages: ``pip install icu4py jieba janome``.

Usage:
  python bench/multilingual_lexical.py [--langs zh_CN,ja,...] [--docs 600] [--max-chars 2000] [--json OUT]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sqlite3
import sys
import time
import unicodedata
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from offline_sets import NAME_LINE, _render  # noqa: E402

from indexer.search import lexical  # noqa: E402
from indexer.search.analyzer import STOPWORDS, stemmer  # noqa: E402

LANGS = ("zh_CN", "zh_TW", "ja", "ko", "ru", "uk", "de", "fr", "nl", "sv", "pt", "en")
CJK = ("zh_CN", "zh_TW", "ja", "ko")
Terms = Callable[[str], list[str]]


def _rank(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _split_first_section(text: str) -> tuple[str, str] | None:
    """(NAME description, page without its NAME section): the first section, whatever its localized title."""
    lines = text.splitlines()
    heads = [i for i, ln in enumerate(lines) if i > 0 and ln.strip() and not ln[0].isspace()]
    if len(heads) < 2:
        return None
    start, end = heads[0], heads[1]
    m = NAME_LINE.match(" ".join(ln.strip() for ln in lines[start + 1 : end]))
    if m is None:
        return None
    body = "\n".join(ln.rstrip() for ln in lines[1:start] + lines[end:]).strip()
    return m.group("what").strip(), re.sub(r"\n{3,}", "\n\n", body)


def man_set(lang: str, max_docs: int, max_chars: int) -> list[dict[str, str]]:
    """[{id, title, text, query}] of the language's pages, up to ``max_docs`` in hash order."""
    base = Path("/usr/share/man") if lang == "en" else Path("/usr/share/man") / lang
    dirs = ("man1", "man8") if lang == "en" else ("man1", "man5", "man8")
    pages = sorted((p for d in dirs if (base / d).is_dir() for p in (base / d).iterdir()
                    if p.is_file() and not p.name.startswith("gcloud")), key=lambda p: _rank(p.name))  # fmt: skip
    rows: list[dict[str, str]] = []
    for page in pages:
        if len(rows) >= max_docs:
            break
        parts = _split_first_section(_render(page))
        if parts is None or len(parts[1]) < 200:
            continue
        query = parts[0]
        short = len(query) < 4 if lang in CJK else len(query.split()) < 3
        if short:
            continue
        rows.append({"id": page.name, "title": page.name.split(".")[0], "text": parts[1][:max_chars],
                     "query": query})
    seen = Counter(" ".join(r["query"].casefold().split()) for r in rows)
    return [r for r in rows if seen[" ".join(r["query"].casefold().split())] == 1]


# -- analyzers ------------------------------------------------------------------------------------------------
def _icu() -> Terms | None:
    try:
        from icu4py.breakers import WordBreaker
    except ImportError:
        return None
    word = re.compile(r"\w")
    stem = stemmer("english")

    def terms(text: str) -> list[str]:
        out = []
        for piece in WordBreaker(unicodedata.normalize("NFKC", text), "en"):
            if not word.search(piece) or len(piece) > 64:
                continue
            folded = piece.casefold()
            if folded in STOPWORDS:
                continue
            out.append(stem.stemWord(folded) if folded.isascii() else folded)
        return out

    return terms


def _jieba() -> Terms | None:
    try:
        import jieba
    except ImportError:
        return None
    jieba.setLogLevel(60)
    word = re.compile(r"\w")
    return lambda text: [t.casefold() for t in jieba.cut_for_search(unicodedata.normalize("NFKC", text))
                         if word.search(t)]


def _janome() -> Terms | None:
    try:
        from janome.tokenizer import Tokenizer
    except ImportError:
        return None
    tok = Tokenizer(wakati=True)
    word = re.compile(r"\w")
    return lambda text: [t.casefold() for t in tok.tokenize(unicodedata.normalize("NFKC", text)) if word.search(t)]


def analyzers(lang: str) -> dict[str, tuple[Terms, str, Terms | None]]:
    """name -> (document terms, FTS5 tokenizer, query terms when not the document's) of the analyzers to
    compare on ``lang``."""
    out: dict[str, tuple[Terms, str, Terms | None]] = {
        "v1": (lexical.analyzer("1").words, "unicode61 remove_diacritics 0 tokenchars '_'", None),
    }
    for version in lexical.versions()[1:]:
        made_by = lexical.analyzer(version)
        out[f"v{version}"] = (made_by.words, "ascii tokenchars '_'", made_by.query_words)
    optional = {"icu": _icu(), "jieba": _jieba() if lang.startswith("zh") else None,
                "janome": _janome() if lang == "ja" else None}
    out.update({name: (fn, "ascii tokenchars '_'", None) for name, fn in optional.items() if fn is not None})
    return out


# -- ranking --------------------------------------------------------------------------------------------------
def evaluate(rows: list[dict[str, str]], terms: Terms, tokenizer: str,
             queries: list[tuple[str, set[int]]] | None = None, query_terms: Terms | None = None,
             per_query: list[float] | None = None) -> dict[str, float]:
    """nDCG@10 of FTS5 BM25 over ``terms`` (``queries``: (text, relevant row indexes); None: each row's own
    query, answered by that row; ``query_terms``: a query's terms when not ``terms``'; ``per_query``: filled
    with each query's gain), and the time to analyze a document and to answer a query (terms + FTS5)."""
    db = sqlite3.connect(":memory:")
    db.execute(f'CREATE VIRTUAL TABLE lexical USING fts5(title, body, tokenize="{tokenizer}")')
    t0 = time.perf_counter()
    made = [(i, *(" ".join(t) for t in _fields(r, terms))) for i, r in enumerate(rows)]
    analyze_s = time.perf_counter() - t0
    db.executemany("INSERT INTO lexical(rowid, title, body) VALUES (?, ?, ?)", made)
    asked = queries if queries is not None else [(r["query"], {i}) for i, r in enumerate(rows)]
    made_by = getattr(query_terms, "__self__", None)
    if getattr(made_by, "by_language", False):  # told among the collection's languages, as the stores do
        held = lexical.held(lexical.count_languages({"lang": made_by.language(r["text"])} for r in rows))  # type: ignore[union-attr]
        query_terms = partial(made_by.query_words, held=held)  # type: ignore[union-attr]
    gains, query_s = [], []
    for text, relevant in asked:
        t1 = time.perf_counter()
        words = list(dict.fromkeys((query_terms or terms)(text)))
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
        ranked = [rid for (rid,) in db.execute(
            "SELECT rowid FROM lexical WHERE lexical MATCH ? ORDER BY bm25(lexical, 2.0, 1.0) LIMIT 10", (match,))
        ] if words else []  # fmt: skip
        query_s.append(time.perf_counter() - t1)
        dcg = sum(1 / math.log2(n + 2) for n, rid in enumerate(ranked) if rid in relevant)
        gains.append(dcg / sum(1 / math.log2(n + 2) for n in range(min(10, len(relevant)))))
    if per_query is not None:
        per_query.extend(gains)
    query_s.sort()
    return {"ndcg@10": sum(gains) / len(gains), "analyze_ms_per_doc": 1000 * analyze_s / len(rows),
            "query_ms_p50": 1000 * query_s[len(query_s) // 2], "queries": len(asked)}


def _fields(row: dict[str, str], terms: Terms) -> tuple[list[str], list[str]]:
    """(title terms, body terms) of a row; an analyzer that detects languages makes both in the text's (the
    product does so: :func:`indexer.search.lexical.fields`)."""
    made_by = getattr(terms, "__self__", None)
    if getattr(made_by, "by_language", False):
        lang = made_by.language(row["text"])  # type: ignore[union-attr]
        return terms(row["title"], lang), terms(row["text"], lang)  # type: ignore[call-arg]
    return terms(row["title"]), terms(row["text"])


def beir(root: Path) -> tuple[list[dict[str, str]], list[tuple[str, set[int]]]]:
    """A BEIR set (corpus.jsonl, queries.jsonl, qrels.tsv): its documents as rows and its judged queries."""
    docs = [json.loads(ln) for ln in (root / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if ln]
    index = {str(d["_id"]): i for i, d in enumerate(docs)}
    rows = [{"id": str(d["_id"]), "title": str(d.get("title") or ""), "text": str(d.get("text") or "")}
            for d in docs]
    qrels: dict[str, set[int]] = {}
    for line in (root / "qrels.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        qid, did, grade = line.split("\t")[:3]
        if int(grade) > 0 and did in index:
            qrels.setdefault(qid, set()).add(index[did])
    texts = {str(q["_id"]): str(q["text"]) for q in map(json.loads, (root / "queries.jsonl").read_text(
        encoding="utf-8").splitlines()) if str(q["_id"]) in qrels}  # fmt: skip
    return rows, [(texts[q], rel) for q, rel in sorted(qrels.items()) if q in texts]


def main() -> None:
    from indexer.models.native import machine_line

    print(machine_line(), flush=True)  # every figure names its CPU
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--langs", default=",".join(LANGS))
    ap.add_argument("--docs", type=int, default=600)
    ap.add_argument("--max-chars", type=int, default=2000)
    ap.add_argument("--cache", type=Path, default=Path("/tmp/indexer-multilingual-sets"))
    ap.add_argument("--handwritten", type=Path, action="append", default=[])
    ap.add_argument("--beir", type=Path, help="a BEIR folder (SciFact train): v1 against v2 on it, English")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if args.beir:
        rows, queries = beir(args.beir)
        found = {name: evaluate(rows, fn, tok, queries, query) for name, (fn, tok, query) in
                 analyzers("en").items() if name.startswith("v")}
        print(json.dumps(found, indent=1))
        if args.json:
            args.json.write_text(json.dumps({"beir": str(args.beir), "results": found}, indent=1), encoding="utf-8")
        return
    sets: dict[str, list[dict[str, str]]] = {}
    for lang in args.langs.split(","):
        cached = args.cache / f"{lang}-{args.docs}-{args.max_chars}.json"
        if cached.exists():
            sets[lang] = json.loads(cached.read_text(encoding="utf-8"))
        else:
            sets[lang] = man_set(lang, args.docs, args.max_chars)
            cached.parent.mkdir(parents=True, exist_ok=True)
            cached.write_text(json.dumps(sets[lang], ensure_ascii=False), encoding="utf-8")
    for extra in args.handwritten:
        sets.update(json.loads(extra.read_text(encoding="utf-8")))
    results: dict[str, dict[str, dict[str, float]]] = {}
    for lang, rows in sets.items():
        if len(rows) < 10:
            print(f"{lang}: only {len(rows)} queries, skipped", file=sys.stderr)
            continue
        results[lang] = {name: evaluate(rows, fn, tok, None, query)
                         for name, (fn, tok, query) in analyzers(lang).items()}
        line = "  ".join(f"{n} {r['ndcg@10']:.4f}" for n, r in results[lang].items())
        print(f"{lang:6} {len(rows):4} queries  {line}", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"sets": {k: len(v) for k, v in sets.items()}, "results": results},
                                        indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
