"""Fail on any import cycle among the modules of ``indexer`` and ``plugins``, type-only imports included.

import-linter's contracts (``make lint``) leave ``if TYPE_CHECKING:`` imports out (``exclude_type_checking_imports``);
this check counts them too, and imports inside functions: a circle of modules that only type checking closes is
still a circle a reader has to hold in mind. A package's ``__init__`` re-exporting its own submodules is not a
circle (it is how a package presents itself). Run: ``python tools/import_cycles.py`` (``make lint`` does).
"""

from __future__ import annotations

import sys

import grimp

PACKAGES = ("indexer", "plugins")


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    modules = sorted(graph.modules)
    edges: dict[str, list[str]] = {}
    for m in modules:
        out = []
        for target in sorted(graph.find_modules_directly_imported_by(m)):
            if target not in graph.modules:
                continue
            if m == target or _reexport(m, target):
                continue
            out.append(target)
        edges[m] = out
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in modules:
        if start in index:
            continue
        work = [(start, iter(edges[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(edges[nxt])))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.append(m)
                    if m == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _reexport(importer: str, imported: str) -> bool:
    """A package's ``__init__`` importing a module inside the package (its public names)."""
    return imported.startswith(importer + ".")


def main() -> int:
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=False)
    cycles = _cycles(graph)
    for component in cycles:
        print("import cycle (type-only imports included): " + " <-> ".join(component))
    if cycles:
        print(f"{len(cycles)} import cycle(s); break each (move the shared name down a layer, or pass a value)")
        return 1
    print(f"no import cycles among {len(graph.modules)} modules (type-only imports included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
