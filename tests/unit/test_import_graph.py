"""The import graph of ``src/cdclake`` (read from the source with ``ast``, function-level imports included).

* no module imports itself through others (no cycle), and no package does (no cycle between packages);
* every package belongs to a layer of :data:`LAYERS` (docs/architecture.md) and imports only from its own
  layer or the ones below it;
* the domain package never imports Airflow, and only ``cdclake.cli`` imports typer and rich;
* nothing in the domain package imports the CLI or the plugins.
"""

from __future__ import annotations

import ast
import re
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

#: The layers of ``src/cdclake``, bottom first, as docs/architecture.md draws them: the top-level modules and
#: packages of each (``cdclake`` is the package's own ``__init__``).
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("foundation", frozenset({"cdclake", "exceptions", "typedef", "paths", "settings", "sql", "gateway"})),
    ("vocabulary", frozenset({"debezium", "dialects", "connectors"})),
    ("engines", frozenset({"decode", "lake", "spark", "cds", "cds_warmup", "connect", "signals", "capture", "assets"})),
    ("ingestion", frozenset({"ingest"})),
    ("orchestration", frozenset({"orchestration"})),
    ("local stack", frozenset({"stack"})),
    ("sources and checks", frozenset({"databases", "reconcile", "monitor"})),
    ("demo", frozenset({"demo"})),
    ("cli", frozenset({"cli"})),
)


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


def _package(module: str) -> str:
    """``cdclake.ingest.batch.plan`` -> ``ingest``; ``cdclake`` -> ``cdclake``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _layer(module: str) -> int:
    package = _package(module)
    for index, (_, members) in enumerate(LAYERS):
        if package in members:
            return index
    raise AssertionError(f"{package} ({module}) is in no layer of LAYERS: add it there and to docs/architecture.md")


def test_the_graph_is_read_from_the_source() -> None:
    graph = _internal_graph()
    assert "cdclake.decode" in graph["cdclake.ingest.batch.decode"]
    assert "cdclake.cds" in graph["cdclake.spark"]  # a function-level import counts


def test_every_package_is_in_one_layer() -> None:
    members = [package for _, packages in LAYERS for package in packages]
    assert len(members) == len(set(members))
    assert {_package(m) for m in MODULES} == set(members)


def test_no_layer_imports_one_above_it() -> None:
    graph = _internal_graph()
    upward = [
        f"{m} ({LAYERS[_layer(m)][0]}) imports {d} ({LAYERS[_layer(d)][0]})"
        for m in sorted(graph)
        for d in sorted(graph[m])
        if _layer(d) > _layer(m)
    ]
    assert upward == []


def test_no_package_imports_itself_through_others() -> None:
    graph: dict[str, set[str]] = {}
    for module, deps in _internal_graph().items():
        graph.setdefault(_package(module), set()).update(_package(d) for d in deps if _package(d) != _package(module))
    cycles = [" -> ".join(cycle) for p in sorted(graph) if (cycle := _cycle_through(graph, p))]
    assert cycles == []


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


ARCHITECTURE = SRC.parent / "docs" / "architecture.md"


def test_docs_architecture_draws_these_layers() -> None:
    """The layer table of docs/architecture.md (top first) is :data:`LAYERS` (bottom first)."""
    rows = re.findall(r"^\| (\d+) ([a-z ]+) \| (.+?) \| .+ \|$", ARCHITECTURE.read_text(encoding="utf-8"), re.M)
    drawn = [(name, frozenset(re.findall(r"`([a-z_]+)`", members))) for _, name, members in rows]
    assert [int(number) for number, _, _ in rows] == list(range(len(LAYERS), 0, -1))
    assert drawn[::-1] == list(LAYERS)


def test_docs_architecture_names_existing_modules_and_files() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    root = SRC.parent
    paths = re.findall(r"`((?:src|jvm|tests|include)/[^`*<]+?)`", text)  # not the `<name>` templates
    missing = [path for path in paths if not (root / path).exists()]
    missing += [name for name in re.findall(r"`(cdclake(?:\.[a-z_]+)+)`", text) if _owner(name) is None]
    assert missing == []
