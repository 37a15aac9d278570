"""A third-party store runs this project's contract suites from indexer.plugin_api.testing alone (issue 43): a
plugin author's two files, written as docs/plugins.md shows them, run by pytest in a child process against a
registered store (FAISS stands in for the plugin: registering is all a store needs)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

CONFTEST = '''
import pytest
from indexer.plugin_api.testing.fixtures import collection, make_store  # noqa: F401

@pytest.fixture
def store_kind() -> str:
    return "faiss"
'''

SUITE = '''
from indexer.plugin_api.testing.store_contract import *  # noqa: F403
from indexer.plugin_api.testing.lexical_contract import *  # noqa: F403
'''


def test_a_plugin_runs_the_contract_suites_from_the_plugin_api(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (tmp_path / "test_contract.py").write_text(textwrap.dedent(SUITE))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    counts = re.search(r"(\d+) passed", out)
    assert counts is not None and int(counts.group(1)) >= 20, out[-2000:]  # store suite (per metric) + lexical
    assert not re.search(r"\d+ (failed|error|skipped)", out), out[-2000:]
