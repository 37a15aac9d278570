"""Prometheus metrics of one server, in their own registry (two apps in one process do not collide)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST as PROMETHEUS_CONTENT_TYPE
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["PROMETHEUS_CONTENT_TYPE", "Metrics"]

_LATENCY_BUCKETS = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)


class Metrics:
    def __init__(self, queue_depth: Callable[[], float]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Histogram(
            "indexer_http_request_duration_seconds",
            "HTTP request latency by route, method and status",
            ["method", "route", "status"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.stages = Histogram(
            "indexer_search_stage_seconds",
            "search time by stage (embed, search, rerank, total)",
            ["stage"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.tokens_embedded = Counter(
            "indexer_tokens_embedded_total", "tokens embedded (/v1/embeddings and indexing)", ["source"], registry=r
        )
        self.rerank_pairs = Counter(
            "indexer_rerank_pairs_total", "query-document pairs scored by the reranker", ["source"], registry=r
        )
        self.rejected = Counter(
            "indexer_overload_rejections_total",
            "requests refused with 503 because the model queue was full",
            registry=r,
        )
        self.embed_batch = Histogram(
            "indexer_embedding_batch_requests",
            "/v1/embeddings requests answered by one engine call",
            buckets=(1, 2, 4, 8, 16, 32, 64),
            registry=r,
        )
        self.errors = Counter("indexer_errors_total", "error answers by type", ["type"], registry=r)
        self.queue_depth = Gauge("indexer_queue_depth", "model jobs queued or running", registry=r)
        self.queue_depth.set_function(queue_depth)
        self.points = Gauge("indexer_index_points", "points in the vector store", ["collection"], registry=r)
        self.chunks = Gauge("indexer_index_chunks", "chunks recorded in the state store", ["collection"], registry=r)
        self.files = Gauge("indexer_index_files", "indexed files", ["collection"], registry=r)
        self.freshness = Gauge(
            "indexer_freshness_lag_seconds",
            "seconds from a file change to it being searchable, last batch (watcher)",
            ["collection"],
            registry=r,
        )

        self.recall = Gauge(
            "indexer_recall_estimate",
            "recall@10 of the approximate index against exact search, last measured (1 when the search is exact)",
            ["collection"],
            registry=r,
        )
        self.recall_sample = Gauge(
            "indexer_recall_sample_queries", "queries the last recall estimate sampled (0: exact search)",
            ["collection"], registry=r,
        )
        self.recall_below = Gauge(
            "indexer_recall_below_floor", "1 when the recall estimate is below the floor (recall_floor)",
            ["collection"], registry=r,
        )

    def observe_status(self, status: dict[str, object]) -> None:
        name = str(status.get("collection"))
        for gauge, key in ((self.points, "points"), (self.chunks, "chunks"), (self.files, "files")):
            value = status.get(key)
            if isinstance(value, (int, float)):
                gauge.labels(collection=name).set(value)
        recall = status.get("recall")
        estimate = recall.get("estimate") if isinstance(recall, dict) else None
        if isinstance(recall, dict) and isinstance(estimate, dict):
            self.recall.labels(collection=name).set(float(estimate["recall"]))
            self.recall_sample.labels(collection=name).set(int(estimate["sample"]))
            self.recall_below.labels(collection=name).set(1 if recall.get("below_floor") else 0)

    def render(self) -> bytes:
        return generate_latest(self.registry)
