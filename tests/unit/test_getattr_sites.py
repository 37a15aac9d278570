"""Every ``getattr(`` left in indexer/ is listed here with its reason (issue: Ports). An ability of a plugin or a
port is declared on the port (indexer/ports.py) and called; what remains reads third-party objects, our own
dataclasses by field name, lazily imported modules, or half-built objects in ``__init__``/``__del__``. The
``probes`` entries are plugin-ability lookups not yet moved to a port: the count may only go down."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SITES: dict[str, tuple[int, str]] = {
    # no probe of a plugin's ability is left (issue 43: the model handle, StoreProcesses, typed closes)
    "indexer/collection/aliases.py": (1, "an aliased store forwards the optional ports of the store it aliases "
                                         "(LexicalSearch, PayloadScan) by name, the collection mapped"),
    "indexer/models/convert/__init__.py": (1, "a converter family module's optional accepts(config)"),
    "indexer/server/watchers.py": (1, "the service's optional watch discovery (tests build services without)"),
    # the adapters that put plugins under the ports' defaults: the one lookup each
    "indexer/ports.py": (4, "as_source and as_progress: a plain plugin's own members, looked up once"),
    "indexer/core/entry_points.py": (2, "a plugin's declared INDEXER_PLUGIN_API; an entry point's distribution"),
    # third-party objects
    "indexer/cli/main.py": (7, "click/typer commands and params, and the exit code of click's exceptions"),
    "indexer/server/app.py": (2, "starlette routes' path (Mount has none)"),
    "indexer/watch/observers.py": (3, "watchdog's emitters and events (moves have dest_path)"),
    "indexer/core/images.py": (1, "a PIL image's format (None for images made in memory)"),
    "indexer/core/config_errors.py": (1, "pydantic's ValidationError.errors"),
    "indexer/engine/mtmd_native.py": (3, "llama-cpp-python's mtmd library handle; a half-built projector's ctx"),
    # our own objects, by field name or half-built
    "indexer/collection/parts.py": (2, "settings read by the names of the prompt settings"),
    "indexer/codec.py": (4, "the codec reads our dataclasses' fields by the names of its field tables"),
    "indexer/types.py": (2, "dataclass fields by name (to_dict, repr)"),
    "indexer/ops/evaluate.py": (2, "a score's metric by name (nDCG, recall, MRR)"),
    "indexer/search/query.py": (1, "a clause's text, or the string it was given"),
    "indexer/engine/llama_embedding.py": (5, "attributes of a half-built engine (llama_cpp.Llama.__init__ calls "
                                             "our methods before ours are set; __del__ after a failed init)"),
    "indexer/engine/multimodal_model.py": (2, "the same: a half-built engine's handler and verbosity"),
    "indexer/core/sqlite_errors.py": (1, "the path of an error object that may not have one"),
    "indexer/models/native_child.py": (1, "a signal by the name a test asked for"),
    "indexer/__init__.py": (1, "a lazily imported public name (PEP 562)"),
    "indexer/plugin_api/__init__.py": (1, "the second door's names, imported on first use (PEP 562)"),
}


def test_every_getattr_left_is_listed_with_its_reason():
    found: dict[str, int] = {}
    for path in (ROOT / "indexer").rglob("*.py"):
        n = path.read_text(encoding="utf-8").count("getattr(")
        if n:
            found[str(path.relative_to(ROOT))] = n
    new = {f: n for f, n in found.items() if f not in SITES}
    grown = {f: (n, SITES[f][0]) for f, n in found.items() if f in SITES and n > SITES[f][0]}
    assert not new, f"getattr( in a file not listed here: declare the ability on its port instead: {new}"
    assert not grown, f"more getattr( than listed (found, listed): {grown}"
    gone = {f for f in SITES if f not in found}
    assert not gone, f"no getattr( left in {gone}: drop their entries"
    assert sum(found.values()) <= 50  # 77 when the Ports issue began (counted the same way)
