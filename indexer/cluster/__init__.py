"""Indexing on a Ray cluster (docs/deploy.md#indexing-on-a-ray-cluster): embedding spread over a cluster's nodes.

The writer stays the one process that owns the state and writes the store. With the ``cluster`` setting (or
``--cluster ADDRESS`` on ``indexer index``, ``reindex`` and ``watch``) its model handle holds a
:class:`~indexer.cluster.embedder.ClusterEmbedder` instead of the bare llama.cpp adapter: a batch large enough
to be worth the trip is cut into parts and embedded by a pool of Ray actors, each holding one llama.cpp
context of the collection's recorded weight file; small batches (a watcher's one-file edit, a query) stay in
the writer's own context.

- :mod:`indexer.cluster.connect`: joining the cluster (token authentication required, no dashboard), its
  errors translated.
- :mod:`indexer.cluster.worker`: what runs inside an actor (the weight file fetched once per node through
  Ray's object store unless the node already has it, the model loaded, the canary embedded).
- :mod:`indexer.cluster.embedder`: the pool, the canary check that refuses a worker whose vectors differ from
  the writer's, retries on another worker when one dies, and the local fallback when the cluster is lost.
"""
