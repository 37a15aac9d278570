"""A real Ray cluster on loopback for the cluster tests: a head without CPUs (it schedules, it does not embed) and
two worker nodes of one CPU each (Ray's own cluster utilities, as Ray's tests make them), token authentication
on, no dashboard, a bounded object store."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Ray reads RAY_AUTH_MODE once, when it is imported: token authentication is on for everything it does here
os.environ["RAY_AUTH_MODE"] = "token"
os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(32))
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # loopback stays loopback (indexer.cluster.connect)
ray = pytest.importorskip("ray", reason="the cluster extra: pip install 'llama-indexer[cluster]' (make test does)")

NODE = {"num_cpus": 1, "object_store_memory": 96 * 1024 * 1024, "node_ip_address": "127.0.0.1"}


@pytest.fixture(scope="session")
def float_model(embed_model_f16_path: Path) -> Path:
    """The default model at f16, for tests that hold a cluster's points equal to one machine's: a node may embed a
    text in another batch than the writer would, and a quantized file's vectors then differ by up to its tolerance
    (0.999 cosine: enough to swap near-ties in a top-10), float ones by far less. The default weight type is this
    machine's fastest (q8_0 on an Intel Xeon with AMX), so the tests name theirs."""
    return embed_model_f16_path


@pytest.fixture(scope="session")
def other_weights(q8_runs: bool) -> Path:
    """The default model at another weight type than :func:`float_model`'s: q8_0 where it runs, else bf16."""
    from indexer.models import ensure_model

    return ensure_model(quant="q8_0" if q8_runs else "bf16")


@pytest.fixture(scope="session")
def ray_token() -> str:
    return os.environ["RAY_AUTH_TOKEN"]


@pytest.fixture(scope="module")  # torn down after its module: its processes never linger beside the other tests
def ray_cluster(ray_token: str) -> Iterator[Any]:
    from ray.cluster_utils import Cluster

    from indexer.cluster.connect import disconnect

    before = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN"] = ray_token
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "include_dashboard": False, "object_store_memory": 96 * 1024 * 1024,
        "node_ip_address": "127.0.0.1"})
    for _ in range(2):
        cluster.add_node(**NODE)
    cluster.wait_for_nodes()
    try:
        yield cluster
    finally:
        disconnect()
        cluster.shutdown()
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def worker_nodes(cluster: Any) -> list[Any]:
    return list(cluster.worker_nodes)
