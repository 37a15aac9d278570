"""Property-based fuzzing of the OpenAPI schema (schemathesis) against the real server: never a 5xx, and every
answer matches the documented schema. Every route is fuzzed, the Qdrant-shaped ones too (with a generated
collection name and with the served attachment's), with the generated bodies spoiled on purpose: string leaves
get lone surrogates and values get wrapped in deep nesting. A bounded budget (examples per operation), so it
runs in the normal test run.

Uses schemathesis' Python API with hypothesis directly (its lazy pytest fixture loader does not run on pytest 9).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.server.conftest import ATTACHED, ServerHandle

pytestmark = pytest.mark.slow

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import response_schema_conformance  # noqa: E402

EXAMPLES_PER_OPERATION = 12
ODD_TEXT = st.text(alphabet=st.characters(categories=["Cs", "Lu", "Nd", "Zs", "So"]), min_size=1, max_size=8)


def spoiled(value: Any, depth: int = 0) -> st.SearchStrategy[Any]:
    """``value`` as generated, or with lone surrogates in its strings, or wrapped in deep nesting."""
    if isinstance(value, str):
        return st.one_of(st.just(value), st.just(value + "\ud800"), st.builds(lambda s: value + s, ODD_TEXT))
    if isinstance(value, dict) and depth < 8:
        return st.fixed_dictionaries({k: spoiled(v, depth + 1) for k, v in value.items()})
    if isinstance(value, list) and depth < 8:
        return st.tuples(*(spoiled(v, depth + 1) for v in value)).map(list)
    return st.one_of(st.just(value), st.integers(2, 1200).map(lambda n: _nest(value, n)))


def _nest(value: Any, n: int) -> Any:
    for _ in range(n):
        value = {"must": [value]}
    return value


def fuzz(op: Any, client: httpx.Client, **fixed: Any) -> int:
    """Each generated case is sent as generated (schemathesis checks: no 5xx, the documented answer), then
    spoiled and sent again as raw JSON text (no 5xx, a JSON answer)."""
    calls = [0]
    base_url = str(client.base_url)

    @given(case=op.as_strategy(**fixed), data=st.data())
    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    def check(case: Any, data: st.DataObject) -> None:
        kwargs = case.as_transport_kwargs(base_url=base_url)
        case.call_and_validate(base_url=base_url, checks=[not_a_server_error, response_schema_conformance], timeout=120)
        calls[0] += 1
        if "json" not in kwargs:
            return
        body = data.draw(spoiled(kwargs.pop("json")), label="spoiled body")
        try:
            content = json.dumps(body).encode()  # lone surrogates go as \\ud800 escapes, as a JS client sends them
        except RecursionError:
            content = b"[" * 5000 + b"]" * 5000
        headers = {k: v for k, v in kwargs.pop("headers", {}).items() if k.lower() != "content-length"}
        headers["content-type"] = "application/json"
        answer = client.request(
            kwargs["method"], kwargs["url"], params=kwargs.get("params"), headers=headers, content=content
        )
        assert answer.status_code < 500, (kwargs["method"], kwargs["url"], content[:300], answer.text[:300])
        assert answer.headers["content-type"].startswith("application/json"), answer.headers
        answer.json()
        calls[0] += 1

    check()
    return calls[0]


def test_no_server_errors_on_any_route(attached_served: ServerHandle) -> None:
    schema = schemathesis.openapi.from_url(attached_served.url + "/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    paths = {op.path for op in operations}
    assert paths >= {"/search", "/v1/embeddings", "/v1/rerank", "/files", "/status", "/collections/{name}/points/query",
                     "/collections/{name}/points/count", "/collections/{name}/points/scroll", "/collections/{name}"}
    sent = {}
    with attached_served.client() as client:
        for op in operations:
            sent[op.label] = fuzz(op, client)
            if "{name}" in op.path:  # the served attachment, so its handlers (not only the 404) are fuzzed
                sent[op.label + " @" + ATTACHED] = fuzz(op, client, path_parameters={"name": ATTACHED})
    assert all(n > 0 for n in sent.values()), sent
