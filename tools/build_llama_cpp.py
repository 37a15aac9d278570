#!/usr/bin/env python3
"""Build and install llama-cpp-python with the AMX fix and the speed patches: ``make setup``'s install step.

The builder is indexer/engine/llama_build.py (shipped in the wheel, so pip users run
``python -m indexer.engine.llama_build``); it is loaded here by file path because ``make setup`` runs this before
the package and its dependencies are installed. Options: ``--force``, ``--check``, ``--wheel-only``,
``--no-speed-patches``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BUILDER = Path(__file__).resolve().parents[1] / "indexer" / "engine" / "llama_build.py"

if __name__ == "__main__":
    spec = importlib.util.spec_from_file_location("llama_build", BUILDER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.exit(module.main())
