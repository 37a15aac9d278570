"""A plugin written from docs/plugins.md's examples, installed the way pip installs one (a package and its
``.dist-info`` on ``sys.path``), is found, loaded and used: the reader and the source as the page shows them,
with only the helpers the page leaves to the reader filled in. The source defines no ``claims``: the watcher's
question gets the documented default."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLUGINS_MD = ROOT / "docs" / "plugins.md"
_BLOCK = re.compile(r"```python\n(.*?)```", re.S)

HELPERS = '''
import os as _os
from pathlib import Path as _Path


def extract_docx_text(data: bytes) -> str:  # "your parser"
    return data.decode("utf-8")


def tracked_files(root: str):  # "the files git tracks": here, the files of a list the test writes
    from indexer.plugin_api import SourceRef

    for line in (_Path(root) / "TRACKED").read_text().splitlines():
        path = _os.path.join(root, line)
        st = _os.stat(path)
        yield SourceRef(root=root, path=path, size=st.st_size, mtime_ns=st.st_mtime_ns)
'''

PROBE = '''
import json, sys
from pathlib import Path
from indexer.core import registry
from indexer.ports import Source
from indexer.settings import Settings

root = Path(sys.argv[1])
settings = Settings(data_dir=root / "data", source="docsexample")
source = registry.open_source(settings, [root / "tree"])
refs = sorted(Path(r.path).name for r in source.scan())
readers = {type(r).__module__ + "." + type(r).__name__ for r in registry.load_readers()}
print(json.dumps({
    "source": type(source.inner).__module__ + "." + type(source.inner).__name__,  # under the port's defaults
    "port": isinstance(source, Source),
    "refs": refs,
    "available": source.available(),
    "reader": "docs_example_plugin.DocxReader" in readers,
    "claims_default": source.claims(str(root / "tree" / ".hidden" / "x.md")),
}))
'''


def _example(cls: str) -> str:
    block = next(b for b in _BLOCK.findall(PLUGINS_MD.read_text()) if f"class {cls}" in b)
    return block


def test_a_plugin_written_from_the_docs_is_loaded_and_used(tmp_path):
    site = tmp_path / "site"
    package = site / "docs_example_plugin"
    package.mkdir(parents=True)
    code = "\n\n".join([_example("DocxReader"), _example("GitSource"), HELPERS])
    code = code.replace("...  # what scan() would yield", "return None  # what scan() would yield")
    code = code.replace("...  # pick the reader by extension", "raise NotImplementedError  # pick the reader")
    (package / "__init__.py").write_text("from __future__ import annotations\n\n" + textwrap.dedent(code))
    info = site / "docs_example_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: docs-example-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[indexer.readers]\ndocsexample = docs_example_plugin:DocxReader\n\n"
        "[indexer.sources]\ndocsexample = docs_example_plugin:GitSource\n"
    )
    tree = tmp_path / "tree"
    (tree / "docs").mkdir(parents=True)
    (tree / "docs" / "a.md").write_text("tracked\n")
    (tree / "b.txt").write_text("tracked too\n")
    (tree / "untracked.md").write_text("not in the list\n")
    (tree / "TRACKED").write_text("docs/a.md\nb.txt\n")

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["source"] == "docs_example_plugin.GitSource" and seen["port"]  # a plain class, given the defaults
    assert seen["refs"] == ["a.md", "b.txt"] and seen["available"] is True
    assert seen["reader"] is True
    assert seen["claims_default"] is True  # no claims(): every path inside a root is the source's
