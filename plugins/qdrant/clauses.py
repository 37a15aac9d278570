"""The filter language (docs/search.md#filters) as a Qdrant filter with the same meaning, clause by clause: how a
stateless worker filters without the state database (docs/deploy.md#stateless-workers).

One translation, to qdrant-client's models (:func:`clauses_filter`); :func:`to_edge` carries the result to
qdrant-edge's classes for the embedded store. It reads the payload keys the writer adds
(:mod:`indexer.state.payload_fields`): the evaluator of the state (``indexer/state/fields.py``) and this one
compare the same values the same way:

===========  =================================================================================================
text ``=``   contains, any case: ``MatchSubstring`` on the folded value (``filter.t.NAME``, ``filter.p``)
``==``       ``MatchValue`` on the folded value (a path: on ``filter.p`` or, relative, ``filter.rp``)
``^=``       ``MatchPrefix``; ``path^=DIR``: the path itself or a prefix ``DIR/``
``~``        a glob whose ``*`` stand at its start, its end, both, or once inside: a prefix of the value and a
             prefix of the reversed value (``filter.tr``, ``filter.pr``), ``*X*`` a substring; a path matches
             on its absolute or its root-relative form. Others (``?``, ``[...]``, ``a*b*c``, a prefix and a
             suffix that could overlap) have no exact form and are refused naming the clause
``!=``       has the field (``filter.names``), with none of those values
dates        ``filter.n.NAME`` (seconds) by the period's bounds; ``modified`` on ``stat.s`` and ``stat.ns``
             (whole seconds, then the nanoseconds: exact, where a float would round)
numbers      ``Range`` on ``filter.n.NAME``, ``stat.size``
``not``      ``must_not``
===========  =================================================================================================
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from qdrant_client import models as qm

from indexer.plugin_api import InputError, payload_fields

RANGE_OPS = ("<", "<=", ">", ">=")
NS = payload_fields.NS
# what a worker's every search requires: no marker (the writer removes it at the commit). As a `must` on the key
# being absent, not a `must_not` on its value: 0.21 ms against 0.74 ms a search at 2,000 points on qdrant-edge
COMMITTED = qm.IsEmptyCondition(is_empty=qm.PayloadField(key=payload_fields.UNCOMMITTED))
MARKED = qm.Filter(must_not=[COMMITTED])  # the points with the marker (a bool match: qdrant-edge reads True as 1)


def clauses_filter(clauses: Sequence[Any], kinds: Mapping[str, str]) -> qm.Filter:
    """Every clause (all must hold) as one Qdrant filter; ``kinds``: each metadata field's kind (text, number,
    date). An InputError names a clause that has no exact form."""
    return qm.Filter(must=[clause_filter(c, kinds.get(c.field, "text")) for c in clauses])


def clause_filter(c: Any, kind: str = "text") -> qm.Filter:
    """One clause (:class:`indexer.plugin_api.Clause`, as :mod:`indexer.search.filters` reads it)."""
    if c.field == "path":
        cond = _path(c)
    elif c.field == "type":
        match = qm.FieldCondition(key="file_type", match=qm.MatchAny(any=list(c.values)))
        cond = qm.Filter(must_not=[match]) if c.op == "!=" else qm.Filter(must=[match])
    elif c.field == "modified":
        cond = _typed(c.op, list(c.values), _modified, _has("stat.s"))
    elif c.field == "size":
        cond = _typed(c.op, list(c.values), _number("stat.size"), _has("stat.size"))
    else:
        cond = _metadata(c, kind)
    return qm.Filter(must_not=[cond]) if c.negate else cond


# -- path ------------------------------------------------------------------------------------------------------
def _path(c: Any) -> qm.Filter:
    conds: list[Any] = []
    for v in c.values:
        if c.op in ("=", "in"):
            conds.append(_match("filter.p", qm.MatchSubstring(substring=v.text)))
        elif c.op == "~":
            conds.append(qm.Filter(should=[_glob(c, v.text, "filter.p", "filter.pr"),
                                            _glob(c, v.text, "filter.rp", "filter.rpr")]))
        elif c.op == "^=":
            column = "filter.rp" if v.rel else "filter.p"
            if v.rel and v.path == "":
                conds.append(_has(column))
                continue
            conds.append(qm.Filter(should=[_match(column, qm.MatchValue(value=v.path)),
                                            _match(column, qm.MatchPrefix(prefix=v.path.rstrip("/") + "/"))]))
        else:  # == and !=
            conds.append(_match("filter.rp" if v.rel else "filter.p", qm.MatchValue(value=v.path)))
    return qm.Filter(must_not=[_any(conds)]) if c.op == "!=" else _any(conds)


# -- dates and numbers -------------------------------------------------------------------------------------------
def _typed(op: str, bounds: list[tuple[Any, Any]], cmp: Any, has: Any) -> qm.Filter:
    """A date (each bound a period [start, end)) or a number (start == end), as ``indexer.state.fields._typed``:
    ``cmp(op, x)`` is the condition "value op x" (op one of < <= > >= ==); ``has``: the field exists."""
    if op in RANGE_OPS:
        start, end = bounds[0]
        if start == end:  # a number: compared with the number itself
            return _all([cmp(op, start)])
        return _all([{"<": cmp("<", start), ">=": cmp(">=", start), "<=": cmp("<", end), ">": cmp(">=", end)}[op]])
    conds = [cmp("==", start) if start == end else qm.Filter(must=[cmp(">=", start), cmp("<", end)])
             for start, end in bounds]
    if op == "!=":
        return qm.Filter(must=[has], must_not=[_any(conds)])
    return _all([_any(conds)])


def _number(key: str) -> Any:
    """``cmp`` of a number (or date in seconds) held in ``key``: a Range."""
    names = {"<": "lt", "<=": "lte", ">": "gt", ">=": "gte"}

    def cmp(op: str, x: Any) -> qm.FieldCondition:
        if op == "==":
            return qm.FieldCondition(key=key, range=qm.Range(gte=x, lte=x))
        return qm.FieldCondition(key=key, range=qm.Range(**{names[op]: x}))
    return cmp


def _modified(op: str, x: int) -> qm.Filter:
    """``cmp`` of ``modified`` (ns since the epoch, an integer): exact, on the whole seconds (``stat.s``) and the
    nanoseconds beyond (``stat.ns``); ``> x`` is ``>= x + 1``, ``<= x`` is ``< x + 1``."""
    x = int(x)
    if op == ">":
        return _modified(">=", x + 1)
    if op == "<=":
        return _modified("<", x + 1)
    if op == "==":
        return qm.Filter(must=[_modified(">=", x), _modified("<", x + 1)])
    s, ns = divmod(x, NS)
    outer, inner = (qm.Range(gt=s), qm.Range(gte=ns)) if op == ">=" else (qm.Range(lt=s), qm.Range(lt=ns))
    return qm.Filter(should=[qm.FieldCondition(key="stat.s", range=outer),
                             qm.Filter(must=[qm.FieldCondition(key="stat.s", match=qm.MatchValue(value=s)),
                                             qm.FieldCondition(key="stat.ns", range=inner)])])


# -- metadata ------------------------------------------------------------------------------------------------------
def _metadata(c: Any, kind: str) -> qm.Filter:
    k = payload_fields.key(c.field)
    has = qm.FieldCondition(key="filter.names", match=qm.MatchValue(value=c.field))
    if kind in ("date", "number") or c.op in RANGE_OPS:
        if kind == "date" and all(v.start is not None for v in c.values):
            bounds = [(v.start, v.end) for v in c.values]
        elif c.op in RANGE_OPS and c.values[0].number is None:
            bounds = [(c.values[0].start, c.values[0].end)]  # a date bound on a field of numbers
        else:
            bounds = [(v.number, v.number) for v in c.values]
        number = f"filter.n.{k}"
        return _typed(c.op, bounds, _number(number), _has(number))
    text, reverse = f"filter.t.{k}", f"filter.tr.{k}"
    conds: list[Any] = []
    for v in c.values:
        if c.op == "~":
            conds.append(_glob(c, v.text, text, reverse))
        elif c.op == "^=":
            conds.append(_match(text, qm.MatchPrefix(prefix=v.text)))
        elif c.op in ("=", "in"):
            conds.append(_match(text, qm.MatchSubstring(substring=v.text)))
        else:
            conds.append(_match(text, qm.MatchValue(value=v.text)))
    if c.op == "!=":  # has the field, with another value
        return qm.Filter(must=[has], must_not=[_any(conds)])
    return _any(conds)


# -- globs -------------------------------------------------------------------------------------------------------
def _glob(c: Any, pattern: str, column: str, reverse: str) -> qm.Filter:
    """``fnmatch``'s meaning of ``pattern`` (folded) on ``column`` where it has an exact form: ``P*S`` is a prefix P
    and a suffix S (a prefix of the reversed text) that cannot overlap, ``*X*`` contains X, no star: equal."""
    if "?" in pattern or "[" in pattern:
        raise _refused(c, pattern, "? and [...] have no Qdrant form")
    parts = pattern.split("*")
    if len(parts) == 1:
        return qm.Filter(must=[_match(column, qm.MatchValue(value=pattern))])
    head, tail, middle = parts[0], parts[-1], [p for p in parts[1:-1] if p]
    if middle:
        if head or tail or len(middle) > 1:
            raise _refused(c, pattern, "only one part may stand between stars, with nothing before or after")
        return qm.Filter(must=[_match(column, qm.MatchSubstring(substring=middle[0]))])
    if any(head[-k:] == tail[:k] for k in range(1, min(len(head), len(tail)) + 1)):
        raise _refused(c, pattern, f"a value could start with {head!r} and end with {tail!r} in overlapping "
                                   "characters, which the glob does not match")
    conds: list[Any] = [_has(column)]
    if head:
        conds.append(_match(column, qm.MatchPrefix(prefix=head)))
    if tail:
        conds.append(_match(reverse, qm.MatchPrefix(prefix=tail[::-1])))
    return qm.Filter(must=conds)


def _refused(c: Any, pattern: str, why: str) -> InputError:
    return InputError(
        f"filter clause '{c.text}': the glob {pattern!r} has no exact form in Qdrant ({why}); a stateless worker "
        "answers globs with * at the start, the end, both, or around one part (*.md, docs/*, docs/*.md, *draft*): "
        "rewrite it with ^= and = clauses, or search through the writer (its state evaluates any glob)"
    )


# -- helpers ----------------------------------------------------------------------------------------------------
def _match(key: str, match: Any) -> qm.FieldCondition:
    return qm.FieldCondition(key=key, match=match)


def _has(key: str) -> qm.Filter:
    return qm.Filter(must_not=[qm.IsEmptyCondition(is_empty=qm.PayloadField(key=key))])


def _any(conds: list[Any]) -> Any:
    return conds[0] if len(conds) == 1 else qm.Filter(should=conds)


def _all(conds: list[Any]) -> Any:
    return conds[0] if len(conds) == 1 else qm.Filter(must=conds)


# -- qdrant-edge -------------------------------------------------------------------------------------------------
def to_edge(node: Any) -> Any:
    """A qdrant-client filter or condition as qdrant-edge's classes (the same tree)."""
    import qdrant_edge as qe

    if isinstance(node, qm.Filter):
        def each(items: Any) -> list[Any] | None:
            if items is None:
                return None
            return [to_edge(i) for i in (items if isinstance(items, list) else [items])] or None
        return qe.Filter(must=each(node.must), should=each(node.should), must_not=each(node.must_not))
    if isinstance(node, qm.IsEmptyCondition):
        return qe.IsEmptyCondition(node.is_empty.key)
    if isinstance(node, qm.HasIdCondition):
        return qe.HasIdCondition({str(i) for i in node.has_id})
    if isinstance(node, qm.FieldCondition):
        if node.range is not None:
            r: Any = node.range
            return qe.FieldCondition(node.key, range=qe.RangeFloat(gte=r.gte, gt=r.gt, lte=r.lte, lt=r.lt))
        return qe.FieldCondition(node.key, match=_edge_match(qe, node.match))
    raise TypeError(f"no qdrant-edge form for {type(node).__name__}")


def _edge_match(qe: Any, m: Any) -> Any:
    if isinstance(m, qm.MatchValue):
        return qe.MatchValue(m.value)
    if isinstance(m, qm.MatchAny):
        return qe.MatchAny(list(m.any))
    if isinstance(m, qm.MatchSubstring):
        return qe.MatchSubstring(m.substring)
    if isinstance(m, qm.MatchPrefix):
        return qe.MatchPrefix(m.prefix)
    raise TypeError(f"no qdrant-edge form for {type(m).__name__}")
