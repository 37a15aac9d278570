"""An installed (non-editable) wheel works outside the source tree: migrations and plugins ship with it."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (whl,) = out.glob("llama_indexer-*.whl")
    return whl


def test_wheel_contents(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "indexer/migrations/__init__.py" in names
    assert not any(n.startswith("migrations/") for n in names), "no generic top-level 'migrations' package"
    assert {"plugins/faiss/__init__.py", "plugins/qdrant/__init__.py", "plugins/filesystem/__init__.py"} <= set(names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[indexer.stores]" in text and "faiss = plugins.faiss:FaissStore" in text
    assert "indexer = indexer.cli.entry:main" in text  # the light entry (fast `indexer search`), then indexer.cli.main
    # test-only helpers stay out of the wheel
    assert not any("probe" in n for n in names), [n for n in names if "probe" in n]
    assert not any(n.startswith("tests/") for n in names)
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA"))).decode()
    runtime = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line]
    assert not any(line.split()[1].lower().startswith("pytest") for line in runtime), runtime
    assert any(line.split()[1].lower().startswith("charset-normalizer") for line in runtime), runtime


def test_installed_wheel_runs_outside_the_source_tree(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    code = (
        "import sys, indexer, indexer.cli.entry, indexer.cli.main, indexer.migrations, plugins.faiss;"
        "from indexer.core import registry as p;"
        "from indexer.state.database import StateStore;"
        f"assert indexer.__file__.startswith({str(target)!r}), indexer.__file__;"
        "assert sorted(p.available('indexer.stores')) == ['faiss', 'qdrant', 'qdrant_attach'];"
        "assert 'pdf' in p.available('indexer.readers');"
        f"s = StateStore(__import__('pathlib').Path({str(tmp_path / 's.sqlite')!r}));"
        "print(s.applied_migrations())"
    )
    # Run from an empty folder, without site processing (so the editable install's path hook is inactive), with
    # only the installed copy and the dependencies importable.
    deps = [p for p in sys.path if p.endswith("site-packages")]
    code = f"import sys; sys.path[:0] = {[str(target), *deps]!r}; " + code
    done = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "m0001_initial" in done.stdout
