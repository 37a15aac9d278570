"""The README's promise about figures: every `bench/` script prints the machine line
(:func:`indexer.models.native.machine_line`: CPU, flags, llama.cpp build, load) beside what it measures."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
SCRIPTS = sorted(p for p in BENCH.glob("*.py") if '__name__ == "__main__"' in p.read_text(encoding="utf-8"))


def _prints_machine_line(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print" and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name) and arg.func.id == "machine_line":
                return True
    return False


def test_there_are_bench_scripts() -> None:
    assert len(SCRIPTS) >= 20


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_bench_script_prints_the_machine_line(script: Path) -> None:
    assert _prints_machine_line(ast.parse(script.read_text(encoding="utf-8"))), f"{script.name} names no machine"
