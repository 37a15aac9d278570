"""Property-based fuzzing of the OpenAPI schema (schemathesis) against the real server: never a 5xx, and every
answer matches the documented schema.

Uses schemathesis' Python API with hypothesis directly (its lazy pytest fixture loader does not run on pytest 9).
"""

from __future__ import annotations

import pytest

from tests.server.conftest import ServerHandle

pytestmark = pytest.mark.slow

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import response_schema_conformance  # noqa: E402

EXAMPLES_PER_OPERATION = 25


def test_no_server_errors(served: ServerHandle) -> None:
    schema = schemathesis.openapi.from_url(served.url + "/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {op.path for op in operations} >= {"/search", "/v1/embeddings", "/v1/rerank", "/files", "/status"}
    for op in operations:

        @given(case=op.as_strategy())
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def check(case) -> None:
            case.call_and_validate(
                base_url=served.url, checks=[not_a_server_error, response_schema_conformance], timeout=120
            )

        check()
