"""Typed settings. Precedence: explicit arguments (CLI flags) > environment (``INDEXER_*``) > config file > defaults.

The config file is TOML: ``$INDEXER_CONFIG`` if set, else ``<user config dir>/indexer/config.toml``. Example::

    store = "faiss"
    embed_model = "all-MiniLM-L6-v2"
    rerank_model = "/models/bge-reranker-v2-m3-q8_0.gguf"
    candidates = 50
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from indexer.core.config_errors import settings_error
from indexer.core.location import COLLECTION_NAME_RULE, config_file_path, default_data_dir, valid_collection_name

__all__ = ["Settings", "config_file_path", "default_data_dir", "load_settings"]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="INDEXER_", extra="ignore", frozen=True)

    data_dir: Path = Field(default_factory=default_data_dir, description="state database and embedded stores")
    collection: str = "default"
    store: str = Field("faiss", description="vector store plugin (indexer.stores entry point): faiss, qdrant, ...")
    store_options: dict[str, Any] = Field(
        default_factory=dict, description="options for the store plugin, recorded with a new collection (no secrets)"
    )
    source: str = Field("filesystem", description="source plugin (indexer.sources entry point)")
    source_options: dict[str, Any] = Field(default_factory=dict, description="options for the source plugin")
    metric: Literal["cosine", "dot", "euclid", "manhattan"] = "cosine"
    faiss_index: Literal["flat", "hnsw", "auto"] = Field(
        "auto", description="auto: exact flat index, IVF lists with 8-bit codes from 100,000 chunks on"
    )
    # recall that holds (docs/stores.md#recall-that-holds): approximate indexes measure their recall@10 against exact
    # search in the background after writes and raise their search-time parameter to the floor; an explicit
    # parameter below wins and is never tuned
    recall_floor: float = Field(0.97, gt=0, le=1, description="recall@10 the approximate indexes are tuned to keep")
    recall_sample: int = Field(200, ge=1, le=10_000, description="queries per recall measurement")
    recall_interval: float = Field(600.0, ge=0, description="seconds between two recall measurements of a collection")
    recall_tuning: bool = Field(True, description="tune hnsw_ef / nprobe / efSearch from the measured recall")
    recall_latency_budget_ms: float = Field(5.0, gt=0, description="median query time the tuning may spend")
    faiss_nprobe: int | None = Field(None, ge=1, description="IVF lists a FAISS search visits (unset: tuned)")
    faiss_ef_search: int | None = Field(None, ge=1, description="FAISS HNSW search beam (unset: tuned)")
    faiss_ivf_lists: int | None = Field(None, ge=8, le=65_536, description="FAISS IVF lists (unset: chosen)")
    qdrant_hnsw_ef: int | None = Field(None, ge=1, description="embedded Qdrant search beam hnsw_ef (unset: tuned)")
    qdrant_hnsw_m: int | None = Field(None, ge=4, le=128, description="embedded Qdrant HNSW m (unset: chosen)")
    qdrant_ef_construct: int | None = Field(None, ge=8, le=4096,
                                            description="embedded Qdrant HNSW ef_construct (unset: chosen)")
    qdrant_url: str | None = None
    qdrant_api_key: str | None = None
    # Qdrant collections created by indexer on a server (distributed mode: docker/compose.cluster.yml); None
    # leaves the server's default. Existing collections keep what they were created with.
    qdrant_shard_number: int | None = Field(None, ge=1, description="shards of a new Qdrant collection")
    qdrant_replication_factor: int | None = Field(None, ge=1, description="copies of each shard (cluster)")
    qdrant_write_consistency_factor: int | None = Field(
        None, ge=1, description="replicas that must confirm a write (at most the replication factor)"
    )
    # A search worker without a state database (docs/deploy.md#stateless-workers): it answers from the store named
    # by store, store_options (an embedded Qdrant folder's path) or qdrant_url, and the models, and writes nothing
    stateless: bool = Field(False, description="search worker: answer from the Qdrant store alone, no state database")
    qdrant_read_consistency: str | None = Field(
        None, description="replicas a Qdrant server search asks: majority, quorum, all or a number (unset: one)"
    )
    qdrant_shard_key: str | None = Field(
        None, description="custom sharding of the Qdrant server collections indexer creates: 'root' (a shard key "
        "per indexed root) or 'tenant:NAME' (every write and read of this process in shard key NAME)"
    )
    qdrant_route_affinity: str | None = Field(
        None, description="X-Qdrant-Route-Affinity on a Qdrant server store's requests: 'caller' (each HTTP caller "
        "its own stable view: its own header, else its address) or a fixed value; embedded Qdrant ignores it"
    )
    embed_model: str = "all-MiniLM-L6-v2"
    rerank_model: str | None = None
    query_prompt: str | None = Field(None, description="prefix for queries (default: the model's, if any)")
    document_prompt: str | None = Field(None, description="prefix for documents (default: the model's, if any)")
    # search
    top_k: int = Field(10, ge=1)
    candidates: int = Field(50, ge=1)
    max_top_k: int = Field(100, ge=1)
    max_candidates: int = Field(200, ge=1)
    search_mode: Literal["dense", "lexical", "hybrid"] = Field(
        "hybrid", description="default search: dense vectors, lexical BM25, or both fused"
    )
    fusion: Literal["rrf", "score", "dbsf"] = Field(
        "score", description="how hybrid search fuses its two rankings (dbsf: Qdrant's distribution-based fusion)"
    )
    fusion_dense_weight: float | None = Field(
        None, ge=0.0, le=1.0,
        description="the dense side's share in hybrid fusion (default: 0.5 for dbsf, as in Qdrant; 0.4 otherwise)",
    )
    rerank_max_tokens: int = Field(256, ge=16, description="cap on query+document tokens per rerank pair")
    rerank_budget_ms: float = Field(
        1000.0, ge=0.0, description="time the rerank stage of one search may take (0: no budget, rerank all)"
    )
    rerank_candidates: int | None = Field(
        None, ge=1, description="candidates to rerank, fixed (overrides the budget; deterministic)"
    )
    # sources and chunking
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    max_file_size: int = Field(10 * 1024 * 1024, ge=1)
    max_image_file_size: int = Field(
        64 * 1024 * 1024, ge=1, description="largest picture file (the image reader's: PNG, JPEG, TIFF, GIF, WebP) "
        "a scan takes; a camera photo is often past max_file_size, which is meant for text"
    )
    chunk_tokens: int | None = Field(
        None, ge=16, description="tokens per chunk of a new collection (default: the model's catalogue value, else "
        "its limit); a collection keeps the size it was made with"
    )
    chunk_overlap: int = Field(32, ge=0)
    chunk_context: Literal["heading", "none"] = Field(
        "none", description="what a new collection embeds in front of each chunk: its heading path (the "
        "document's title and section names; better dense search on every set measured, hybrid on most: "
        "docs/search.md#chunk-context) or nothing; a collection keeps what it was made with"
    )
    # documents (docs/formats.md): bounds on what one file may cost to parse, and per-reader options
    reader_options: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="options per reader kind, e.g. {\"ipynb\": {\"outputs\": false}}"
    )
    max_unpacked_bytes: int = Field(
        500 * 1024 * 1024, ge=1, description="most bytes an Office/OpenDocument/EPUB container may unpack to"
    )
    max_unpack_ratio: float = Field(50.0, gt=0, description="most unpacked bytes per packed byte (zip bombs)")
    embed_media: bool = Field(
        False, description="set by a collection whose model embeds images: readers that can attach media "
        "(images) do; not a setting to write (a text-only model ignores media)",
    )
    parse_timeout: float = Field(60.0, gt=0, description="seconds one document may take to parse (worker process)")
    parse_memory_mb: int = Field(2048, ge=64, description="memory (MiB) the document parser process may use")
    parse_workers: int = Field(
        2, ge=1, le=64, description="files read at once, each document in its own parser process (each within "
        "parse_memory_mb): a slow file never holds back the others"
    )
    embed_batch_chunks: int = Field(256, ge=1, description="chunks embedded and written per batch")
    threads: int | None = Field(None, ge=1, description="llama.cpp threads (default: all cores)")
    cluster: str | None = Field(
        None, description="Ray cluster to embed on when indexing (docs/deploy.md#indexing-on-a-ray-cluster): 'auto' "
        "(the cluster `ray start` made on this machine), HOST:PORT of its head, or 'local' (a one-machine cluster "
        "in this process); none: the writer embeds alone. Needs the cluster extra and token authentication",
    )
    cluster_shared_roots: bool = Field(
        False, description="the roots are visible at the same paths on every Ray node (a shared filesystem): nodes "
        "read the documents they parse themselves instead of receiving their bytes through Ray's object store",
    )
    # indexer watch
    watch_rescan_seconds: float = Field(600.0, ge=0, description="full reconciliation scan interval (0: at start only)")
    watch_polling: bool = Field(False, description="poll instead of inotify (NFS, SMB, some container mounts)")
    watch_poll_seconds: float = Field(1.0, gt=0, description="polling interval of polled roots")
    watch_discover_seconds: float = Field(
        5.0, gt=0, description="how often `indexer serve` looks for new collections to watch"
    )
    # HTTP server (`indexer serve`): loopback by default; keys, caps and queue bound (docs/server.md)
    server_host: str = Field("127.0.0.1", description="address `indexer serve` binds (loopback by default)")
    server_port: int = Field(8480, ge=0, le=65535, description="port `indexer serve` listens on (0: any free port)")
    api_keys: tuple[str, ...] = Field((), description="read-scope API keys; when any key is set, requests need one")
    admin_api_keys: tuple[str, ...] = Field((), description="admin-scope API keys (read scope included)")
    cors_origins: tuple[str, ...] = Field((), description="origins allowed by CORS (none: CORS off)")
    allowed_hosts: tuple[str, ...] = Field(
        (),
        description="Host names `indexer serve` answers to, on every route (none: the loopback names and "
        "server_host); '*.example.com' matches subdomains, '*' any host (turns the DNS-rebinding guard off)",
    )
    trust_forwarded_host: bool = Field(
        False, description="judge the X-Forwarded-Host header (set it at your reverse proxy) instead of Host"
    )
    max_body_bytes: int = Field(1024 * 1024, ge=1024, description="largest HTTP request body accepted")
    max_image_body_bytes: int = Field(
        32 * 1024 * 1024,
        ge=1024,
        description="largest body of a request carrying an image (a data:image/ URI) on /search, /v1/embeddings "
        "and /mcp; other bodies keep max_body_bytes (a 20 MiB image, the decode cap, is 27 MiB as base64)",
    )
    embed_model_aliases: tuple[str, ...] = Field(
        ("default", "indexer"),
        description="other names /v1/embeddings accepts for the served embedding model (e.g. the model name a "
        "client sends by default); they name this model, never another one",
    )
    max_inputs: int = Field(256, ge=1, description="most texts per /v1/embeddings or documents per /v1/rerank call")
    max_request_tokens: int = Field(65536, ge=1, description="most tokens one /v1 request may send to a model")
    max_queue: int = Field(32, ge=1, description="model jobs queued or running before new ones get 503")
    queue_timeout: float = Field(30.0, gt=0, description="seconds a model job may wait in the queue before 503")

    @field_validator("collection")
    @classmethod
    def _collection_name(cls, value: str) -> str:
        if not valid_collection_name(value):
            raise ValueError(COLLECTION_NAME_RULE)
        return value

    @field_validator("store")
    @classmethod
    def _registered_store(cls, value: str) -> str:
        return _registered("indexer.stores", "store", value)

    @field_validator("source")
    @classmethod
    def _registered_source(cls, value: str) -> str:
        return _registered("indexer.sources", "source", value)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml = TomlConfigSettingsSource(settings_cls, toml_file=config_file_path())
        return (init_settings, env_settings, toml)


def _registered(group: str, what: str, value: str) -> str:
    from indexer.core.entry_points import names

    known = names(group)
    if value not in known:
        raise ValueError(
            f"unknown {what} {value!r}; registered {what}s: {', '.join(known) or 'none'} "
            f"(a plugin registers one as an {group} entry point: install its package)"
        )
    return value


def default(name: str) -> Any:
    """The default of setting ``name``, written once here: the CLI's help, the HTTP schemas and the query code
    read it instead of restating it."""
    return Settings.model_fields[name].default


def load_settings(**overrides: Any) -> Settings:
    """Settings with ``overrides`` (None values ignored, so unset CLI flags fall through)."""
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**given)
    except ValueError as exc:  # pydantic's ValidationError/SettingsError and TOML errors subclass ValueError
        raise settings_error(exc, config_file_path()) from exc
