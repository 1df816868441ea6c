"""The package's import graph is one-way: no cycles between its folders or between its modules,
nothing imports the CLI, and the base modules (errors, models, outcomes, settings) import no stage."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "repo2env"
BASE = {"repo2env.errors", "repo2env.models", "repo2env.outcomes", "repo2env.settings"}


def _unit(module: str) -> str:
    """repo2env.languages.python.spec -> repo2env.runtime (a folder); repo2env.jsonl stays itself."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


class _Imports(ast.NodeVisitor):
    """The repo2env modules a file imports (lazy imports included, TYPE_CHECKING ones not)."""

    def __init__(self) -> None:
        self.found: set[str] = set()

    def visit_If(self, node: ast.If) -> None:
        if not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
            self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module and node.module.startswith("repo2env.") and node.level == 0:
            self.found.add(node.module)

    def visit_Import(self, node: ast.Import) -> None:
        self.found.update(alias.name for alias in node.names if alias.name.startswith("repo2env."))


def import_graph() -> dict[str, set[str]]:
    """Folder/module-level edges of every import in the package."""
    edges: dict[str, set[str]] = defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        imports = _Imports()
        imports.visit(ast.parse(path.read_text(encoding="utf-8")))
        edges[_unit(module)].update(_unit(name) for name in imports.found)
    for source in edges:
        edges[source].discard(source)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    state: dict[str, str] = {}
    cycles = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = "open"
        for target in sorted(edges.get(node, ())):
            if state.get(target) == "open":
                cycles.append(trail[trail.index(target):] + [target] if target in trail else [node, target])
            elif target not in state:
                visit(target, trail + [target])
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    return cycles


def test_no_cycles_between_folders():
    assert not _cycles(import_graph()), f"import cycles: {_cycles(import_graph())}"


def module_graph() -> dict[str, set[str]]:
    """Module-level edges, TYPE_CHECKING imports included: a cycle that only type hints close is
    still two modules that cannot be understood (or moved) one without the other. ``from package
    import module`` is an edge to the module."""
    paths = {".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): path
             for path in PACKAGE.rglob("*.py")}
    edges: dict[str, set[str]] = defaultdict(set)
    for module, path in paths.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("repo2env") \
                    and node.level == 0:
                for alias in node.names:
                    submodule = f"{node.module}.{alias.name}"
                    edges[module].add(submodule if submodule in paths else node.module)
            elif isinstance(node, ast.Import):
                edges[module].update(alias.name for alias in node.names if alias.name.startswith("repo2env."))
        edges[module].discard(module)
    return edges


def test_no_cycles_between_modules():
    edges = module_graph()
    # The seam this guards: the override model reads the spec's Python list, the spec applies overrides.
    assert "repo2env.languages.python.spec.overrides" in edges["repo2env.languages.python.spec.env_spec"]
    assert not _cycles(edges), f"import cycles: {_cycles(edges)}"


def test_nothing_imports_the_cli_and_the_base_imports_no_stage():
    edges = import_graph()
    assert {source for source, targets in edges.items() if "repo2env.cli" in targets} <= {"repo2env.__main__"}
    for base in BASE:
        assert edges.get(base, set()) <= BASE, f"{base} imports {edges[base] - BASE}"


#: Stages that must reach sandboxes only through repo2env.runtime.sandbox's protocols (issue 11.2):
#: a new backend then needs no change in them.
PROTOCOL_ONLY = ("repo2env/verify", "repo2env/validate", "repo2env/envs/tools.py")


def _file_imports(path: Path) -> set[str]:
    """Every module a file imports by name (repo2env's and third parties'; TYPE_CHECKING ones too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_stages_use_the_runtime_protocol_not_a_backend():
    offenders = {}
    for place in PROTOCOL_ONLY:
        target = PACKAGE.parent / place
        for path in [target] if target.is_file() else sorted(target.rglob("*.py")):
            backends = {name for name in _file_imports(path)
                        if name.startswith("repo2env.runtime.backends")
                        or name.split(".")[0] == "docker"}
            if backends:
                offenders[str(path.relative_to(PACKAGE.parent))] = sorted(backends)
    assert not offenders, f"import a backend instead of repo2env.runtime.sandbox: {offenders}"
    assert PROTOCOL_ONLY and all((PACKAGE.parent / place).exists() for place in PROTOCOL_ONLY)
