"""Read an existing collection's configuration and the payload layout of a sample of its points. Read-only."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from qdrant_client import QdrantClient
from qdrant_client import models as qm

from indexer.plugin_api import StoreError
from plugins.qdrant_attach.connect import call
from plugins.qdrant_attach.layout import Layout, detect

DEFAULT_SAMPLE = 64
MAX_SAMPLE = 1000
_METRIC = {
    qm.Distance.COSINE: "cosine",
    qm.Distance.DOT: "dot",
    qm.Distance.EUCLID: "euclid",
    qm.Distance.MANHATTAN: "manhattan",
}


@dataclass(frozen=True)
class DenseVector:
    """One dense vector of the collection; ``name`` is "" for the unnamed (default) vector."""

    name: str
    size: int
    distance: str  # our metric names: cosine, dot, euclid, manhattan
    datatype: str  # float32 (Qdrant's default), float16, uint8
    multivector: str | None  # comparator (e.g. max_sim) for multivectors, None for plain vectors

    @property
    def label(self) -> str:
        return self.name or "(unnamed)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "size": self.size,
            "distance": self.distance,
            "datatype": self.datatype,
            "multivector": self.multivector,
        }


@dataclass(frozen=True)
class SparseVector:
    name: str
    modifier: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "modifier": self.modifier}


@dataclass(frozen=True)
class PayloadField:
    """A payload key seen in the sample (one level into dict fields: ``metadata.source``)."""

    key: str
    types: tuple[str, ...]
    present: int  # sampled points that have it

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "types": list(self.types), "present": self.present}


@dataclass(frozen=True)
class CollectionReport:
    name: str  # the collection (an alias given by the user is resolved)
    location: str
    points: int
    status: str
    named_vectors: bool  # False: one unnamed vector
    dense: tuple[DenseVector, ...]
    sparse: tuple[SparseVector, ...]
    payload_indexes: Mapping[str, str]
    aliases: tuple[str, ...]
    sample_size: int
    fields: tuple[PayloadField, ...]
    layout: Layout
    layout_counts: Mapping[str, int] = field(default_factory=dict)
    ours: int = 0  # sampled points carrying our marker

    def vector(self, name: str) -> DenseVector | None:
        return next((v for v in self.dense if v.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "collection": self.name,
            "location": self.location,
            "points": self.points,
            "status": self.status,
            "named_vectors": self.named_vectors,
            "dense_vectors": [v.to_dict() for v in self.dense],
            "sparse_vectors": [v.to_dict() for v in self.sparse],
            "payload_indexes": dict(self.payload_indexes),
            "aliases": list(self.aliases),
            "sample_size": self.sample_size,
            "payload_fields": [f.to_dict() for f in self.fields],
            "layout": self.layout.to_dict(),
            "layout_counts": dict(self.layout_counts),
            "ours_in_sample": self.ours,
        }


def resolve_name(client: QdrantClient, name: str, where: str) -> tuple[str, tuple[str, ...]]:
    """(collection, its aliases); ``name`` may itself be an alias."""
    aliases = call(where, "list aliases", client.get_aliases).aliases
    target = next((a.collection_name for a in aliases if a.alias_name == name), name)
    if not call(where, "check a collection", lambda: client.collection_exists(target)):
        known = ", ".join(sorted(c.name for c in call(where, "list collections", client.get_collections).collections))
        raise StoreError(f"Qdrant at {where} has no collection or alias {name!r} (collections: {known or 'none'})")
    return target, tuple(sorted(a.alias_name for a in aliases if a.collection_name == target))


def dense_vectors(info: qm.CollectionInfo) -> tuple[bool, tuple[DenseVector, ...]]:
    params = info.config.params.vectors
    if params is None:
        return True, ()
    if isinstance(params, qm.VectorParams):
        return False, (_dense("", params),)
    return True, tuple(_dense(name, p) for name, p in sorted(params.items()))


def _dense(name: str, p: qm.VectorParams) -> DenseVector:
    datatype = p.datatype.value if p.datatype is not None else "float32"
    multi = p.multivector_config.comparator.value if p.multivector_config is not None else None
    return DenseVector(name, int(p.size), _METRIC[p.distance], datatype, multi)


def sample_payloads(client: QdrantClient, name: str, where: str, n: int) -> list[dict[str, Any]]:
    records, _ = call(
        where,
        "sample points",
        lambda: client.scroll(name, limit=max(1, min(n, MAX_SAMPLE)), with_payload=True, with_vectors=False),
    )
    return [dict(r.payload or {}) for r in records]


def inspect_collection(
    client: QdrantClient, name: str, where: str, sample: int = DEFAULT_SAMPLE
) -> tuple[CollectionReport, list[dict[str, Any]]]:
    """The collection's report and the sampled payloads (the caller applies the user's layout overrides)."""
    target, aliases = resolve_name(client, name, where)
    info = call(where, "read the collection", lambda: client.get_collection(target))
    named, dense = dense_vectors(info)
    sparse = tuple(
        SparseVector(n, p.modifier.value if p.modifier is not None else None)
        for n, p in sorted((info.config.params.sparse_vectors or {}).items())
    )
    indexes = {k: _schema_name(v) for k, v in sorted((info.payload_schema or {}).items())}
    payloads = sample_payloads(client, target, where, sample)
    layout, counts = detect(payloads)
    points = info.points_count
    if points is None:
        points = call(where, "count points", lambda: client.count(target, exact=True)).count
    report = CollectionReport(
        name=target,
        location=where,
        points=int(points),
        status=str(getattr(info.status, "value", info.status)),
        named_vectors=named,
        dense=dense,
        sparse=sparse,
        payload_indexes=indexes,
        aliases=aliases,
        sample_size=len(payloads),
        fields=_fields(payloads),
        layout=layout,
        layout_counts=counts,
        ours=sum(layout.is_ours(p) for p in payloads),
    )
    return report, payloads


def _schema_name(info: Any) -> str:
    kind = getattr(info, "data_type", None)
    return str(getattr(kind, "value", kind)) if kind is not None else str(info)


def _fields(payloads: Sequence[Mapping[str, Any]]) -> tuple[PayloadField, ...]:
    present: Counter[str] = Counter()
    types: dict[str, set[str]] = {}
    for p in payloads:
        for key, value in _flatten(p):
            present[key] += 1
            types.setdefault(key, set()).add(_type_name(value))
    return tuple(PayloadField(k, tuple(sorted(types[k])), present[k]) for k in sorted(present))


def _flatten(payload: Mapping[str, Any]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, value in payload.items():
        out.append((key, value))
        if isinstance(value, Mapping):
            out.extend((f"{key}.{k}", v) for k, v in value.items())
    return out


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list):
        return "list"
    return type(value).__name__
