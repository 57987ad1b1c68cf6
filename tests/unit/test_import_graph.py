"""The import graph of ``src/cdclake`` (read from the source with ``ast``, function-level imports included).

* no module imports itself through others (no cycle);
* the domain package never imports Airflow, and only ``cdclake.cli`` imports typer and rich;
* nothing in the domain package imports the CLI or the plugins.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "cdclake"


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _owner(name: str) -> str | None:
    """The module of ``cdclake`` that ``name`` (a module or a name inside one) belongs to."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def imports(module: str) -> set[str]:
    """Every top-level name ``module`` imports (``cdclake.x.y`` resolved to its module), at any depth."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            found.add((_owner(name) or name) if name.startswith("cdclake.") else name)
    found.discard(module)
    return found


def _internal_graph() -> dict[str, set[str]]:
    return {m: {d for d in imports(m) if d in MODULES} for m in MODULES}


def _cycle_through(graph: dict[str, set[str]], start: str) -> list[str] | None:
    """A path ``start -> ... -> start``, or None."""
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    seen: set[str] = set()
    while stack:
        node, path = stack.pop()
        for nxt in sorted(graph[node]):
            if nxt == start:
                return [*path, start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, [*path, nxt]))
    return None


def test_the_graph_is_read_from_the_source() -> None:
    graph = _internal_graph()
    assert "cdclake.decode" in graph["cdclake.ingest.job"] and "cdclake.decode.batch" in graph["cdclake.ingest.job"]
    assert "cdclake.cds" in graph["cdclake.spark"]  # a function-level import counts


def test_no_module_imports_itself_through_others() -> None:
    graph = _internal_graph()
    cycles = [" -> ".join(cycle) for m in sorted(graph) if (cycle := _cycle_through(graph, m))]
    assert cycles == []


def test_the_domain_package_has_no_airflow_and_no_cli_dependencies() -> None:
    bad = []
    for module in sorted(MODULES):
        in_cli = module == "cdclake.cli" or module.startswith("cdclake.cli.")
        for name in imports(module):
            top = name.split(".")[0]
            if top in {"airflow", "cdclake_airflow"} or (not in_cli and top in {"typer", "rich"}):
                bad.append(f"{module} imports {name}")
            if not in_cli and (name == "cdclake.cli" or name.startswith("cdclake.cli.")):
                bad.append(f"{module} imports {name}")
    assert bad == []
