"""Indexing on a real Ray cluster (two worker nodes of one CPU on loopback, token authentication on): the points
are the ones a one-machine index makes (ids, count, top-10 of fixed queries), both nodes embed, a node killed
mid-run loses and duplicates nothing, a worker with another weight file is refused by the canary, small batches
stay in the writer, and a cluster that cannot be joined is a clear error."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from indexer.collection.facade import open_collection
from indexer.ports import Progress
from tests.cluster.conftest import NODE
from tests.integration.corpus import write_many

pytestmark = pytest.mark.slow

QUERIES = ("how do glaciers change over seasons", "violins measured by team 3", "compilers in region 7",
           "observation number 400", "orchards")


def _corpus(tmp_path: Path) -> Path:
    return write_many(tmp_path / "notes", 96, paragraphs=6)


def _snapshot(col: Any) -> dict[str, Any]:
    parts = col.parts
    ids = sorted(parts.state.point_ids(col.name))
    tops = {q: [h.chunk_id for h in col.search(q, k=10, mode="dense", rerank=False).hits] for q in QUERIES}
    return {"ids": ids, "count": parts.store.count(col.name), "tops": tops}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, float_model: Path) -> tuple[Path, dict[str, Any]]:
    """The same folder indexed by one process alone (no cluster): what every cluster run must equal."""
    base = tmp_path_factory.mktemp("ref")
    root = _corpus(base)  # (module-scoped: set up before the per-test data dir, so it names its own)
    with open_collection("alone", embed_model=str(float_model), data_dir=str(base / "data")) as col:
        report = col.index([root])
        assert report.files_indexed == 96 and report.cluster is None
        return root, _snapshot(col)


class _KillAt(Progress):
    """Removes one worker node once ``share`` of the run's chunks are embedded."""

    def __init__(self, cluster: Any, share: float, total_chunks: int) -> None:
        # at least four embedding steps (each over both workers) left after the kill, so a part meets the dead node
        # (two were not always enough once the patched engine embedded faster: the run ended before Ray saw it)
        self.cluster, self.at, self.done, self.killed = cluster, min(share * total_chunks, total_chunks - 30), 0, None

    def embedded(self, chunks: int, tokens: int) -> None:
        self.done += chunks
        if self.killed is None and self.done >= self.at:
            self.killed = self.cluster.worker_nodes and next(iter(self.cluster.worker_nodes))
            self.cluster.remove_node(self.killed, allow_graceful=False)


def test_same_points_as_one_machine_and_both_nodes_embed(ray_cluster, reference, tmp_path, float_model):
    root, want = reference
    with open_collection("spread", embed_model=str(float_model), cluster=ray_cluster.address) as col:
        report = col.index([root])
        got = _snapshot(col)
    assert report.files_indexed == 96 and not report.failed
    assert got["ids"] == want["ids"] and got["count"] == want["count"] == len(want["ids"])
    assert got["tops"] == want["tops"]
    work = report.cluster
    assert work is not None and work["workers"] == 2 and work["nodes"] == 2, work
    busy = [n for n in work["per_node"].values() if n["texts"] > 0]
    assert len(busy) == 2, work  # both nodes embedded part of the run
    assert sum(n["texts"] for n in busy) + work["local_texts"] >= report.chunks_embedded
    assert any("embedded on the Ray cluster" in n for n in report.notes)


@pytest.mark.parametrize("share", [0.3, 0.6, 0.9])
def test_a_node_killed_mid_run_loses_and_duplicates_nothing(ray_cluster, reference, float_model, share,
                                                            monkeypatch):
    root, want = reference
    name = f"killed{int(share * 100)}"
    # small embedding steps, each spread over both workers, so the kill at 90 % still has steps after it
    monkeypatch.setattr("indexer.index.batching.EMBED_STEP_TOKENS", 1024)
    monkeypatch.setattr("indexer.index.batching.CLUSTER_STEP_TOKENS", 1024)
    monkeypatch.setattr("indexer.cluster.embedder.MIN_CLUSTER_CHARS", 1)
    monkeypatch.setattr("indexer.cluster.embedder.PART_CHARS", 1000)
    try:
        with open_collection(name, embed_model=str(float_model), cluster=ray_cluster.address) as col:
            killer = _KillAt(ray_cluster, share, len(want["ids"]))
            report = col.index([root], progress=killer)
            got = _snapshot(col)
        assert killer.killed, "the run ended before a node was killed"
        assert report.files_indexed == 96 and not report.failed
        assert got["ids"] == want["ids"], "points lost or duplicated"
        assert got["count"] == len(want["ids"])
        assert got["tops"] == want["tops"]
        work = report.cluster
        assert work is not None
        # its part was redone by the other worker; at 90 % the run may end before Ray reports the node dead (the
        # points above are the goal): the redo is asserted wherever the loss was seen, and always at 30 and 60 %
        if share < 0.9 or work["lost"]:
            assert len(work["lost"]) == 1 and work["workers"] == 1, work
        assert not work["given_up"]
    finally:
        while len(ray_cluster.worker_nodes) < 2:  # the next test gets its two nodes back
            ray_cluster.add_node(**NODE)
        ray_cluster.wait_for_nodes()


def test_the_whole_cluster_lost_mid_run_the_writer_finishes_alone(ray_cluster, reference, float_model,
                                                                   monkeypatch, caplog):
    """Every worker node killed at half the run: the writer embeds the rest itself (said once), and the points are
    the one-machine index's."""
    root, want = reference
    monkeypatch.setattr("indexer.index.batching.EMBED_STEP_TOKENS", 1024)
    monkeypatch.setattr("indexer.index.batching.CLUSTER_STEP_TOKENS", 1024)
    monkeypatch.setattr("indexer.cluster.embedder.MIN_CLUSTER_CHARS", 1)
    monkeypatch.setattr("indexer.cluster.embedder.PART_CHARS", 1000)

    class _KillAll(Progress):
        done, killed = 0, False

        def embedded(self, chunks: int, tokens: int) -> None:
            self.done += chunks
            if not self.killed and self.done >= len(want["ids"]) // 2:
                self.killed = True
                for node in list(ray_cluster.worker_nodes):
                    ray_cluster.remove_node(node, allow_graceful=False)

    try:
        with open_collection("orphaned", embed_model=str(float_model), cluster=ray_cluster.address) as col:
            killer = _KillAll()
            report = col.index([root], progress=killer)
            got = _snapshot(col)
        assert killer.killed
        assert report.files_indexed == 96 and not report.failed
        assert got["ids"] == want["ids"] and got["tops"] == want["tops"]
        work = report.cluster
        assert work is not None and work["given_up"] and work["local_texts"] > 0, work
        assert any("finished alone" in n for n in report.notes)
        assert sum("is lost" in r.message for r in caplog.records) == 1  # said once
    finally:
        while len(ray_cluster.worker_nodes) < 2:
            ray_cluster.add_node(**NODE)
        ray_cluster.wait_for_nodes()


def test_a_worker_with_another_weight_file_is_refused(ray_cluster, float_model, other_weights, caplog):
    """The writer's file is a float one (tolerance 0.9999): a q8_0 worker's vectors are within a q8_0 file's own
    tolerance (0.999) of f16 ones, so the other way round would not be refused, by design."""
    from indexer.cluster.connect import connect
    from indexer.cluster.embedder import ClusterEmbedder
    from indexer.engine.loader import load_embedder
    from indexer.settings import load_settings
    from indexer.types import Normalization

    connect(ray_cluster.address)
    local = load_embedder(load_settings(), float_model)
    reference = load_embedder(load_settings(), float_model)
    spread = ClusterEmbedder.around(local, ray_cluster.address, weights_for={0: other_weights})
    texts = [f"Paragraph {i}: the glacier moved {i} metres over the winter, as team {i % 7} measured." for i in
             range(120)]
    try:
        got = spread.embed_batch(texts, Normalization.L2)
        want = reference.embed_batch(texts, Normalization.L2)
        work = spread.describe()
    finally:
        spread.close()
        reference.close()
    assert len(work["refused"]) == 1, work
    assert "canary" in work["refused"][0] and "node" in work["refused"][0], work["refused"]
    assert work["workers"] == 1  # the other node kept working
    assert sum(n["texts"] for n in work["per_node"].values()) == len(texts)
    assert np.min(np.sum(got * want, axis=1)) > 0.9999  # the refused worker's vectors were never used
    assert sum("refused" in r.message for r in caplog.records) == 1  # said once


def test_small_batches_stay_in_the_writer(ray_cluster, float_model):
    from indexer.cluster.embedder import ClusterEmbedder
    from indexer.engine.loader import load_embedder
    from indexer.settings import load_settings
    from indexer.types import Normalization

    spread = ClusterEmbedder.around(load_embedder(load_settings(), float_model), ray_cluster.address)
    try:
        out = spread.embed_batch(["a one-line edit saved by the user"], Normalization.L2)
        work = spread.describe()
    finally:
        spread.close()
    assert out.shape[0] == 1
    assert work["workers"] == 0 and work["local_texts"] == 1 and not work["per_node"]  # no pool was even made


def test_an_unreachable_cluster_is_a_clear_error(tmp_path, float_model):
    root = write_many(tmp_path / "few", 2)
    env = {**os.environ, "INDEXER_DATA_DIR": str(tmp_path / "data"), "RAY_AUTH_TOKEN": "x" * 64}
    proc = subprocess.run(
        [sys.executable, "-m", "indexer", "index", str(root), "--model", str(float_model), "--cluster",
         "127.0.0.1:9"], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "cannot join the Ray cluster at '127.0.0.1:9'" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert "files:" not in proc.stdout


def test_a_client_without_the_token_is_refused(ray_cluster):
    """Token authentication is on: a driver with another token cannot join (nor run code on the nodes)."""
    script = textwrap.dedent(f"""
        import ray
        try:
            ray.init(address={ray_cluster.address!r}, log_to_driver=False)
            print("JOINED", ray.get(ray.remote(lambda: 1 + 1).remote(), timeout=30))
        except Exception as exc:
            print("REFUSED", type(exc).__name__)
    """)
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "0" * 64}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=180)
    assert "JOINED" not in proc.stdout, proc.stdout + proc.stderr
    assert "REFUSED" in proc.stdout or proc.returncode != 0, proc.stdout + proc.stderr


def test_indexer_refuses_auth_turned_off(monkeypatch):
    from indexer.cluster.connect import require_token_auth
    from indexer.errors import ClusterError

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    with pytest.raises(ClusterError, match="token authentication"):
        require_token_auth()
