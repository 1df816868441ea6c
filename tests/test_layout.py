"""The package's import graph is one-way: no cycles between its folders or between its modules,
nothing imports the CLI, the base modules (defaults, errors, models, outcomes, settings) import no
stage, and the CLI reaches the stages through the composition layer only."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "repo2env"
BASE = {"repo2env.defaults", "repo2env.errors", "repo2env.models", "repo2env.outcomes", "repo2env.settings"}


def _unit(module: str) -> str:
    """repo2env.languages.python -> repo2env.languages (a folder); repo2env.jsonl stays itself."""
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
PROTOCOL_ONLY = ("repo2env/verify", "repo2env/validate", "repo2env/envs/tools.py", "repo2env/envs/policy.py",
                 "repo2env/harness")


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


# --- the layers: imports point down ---------------------------------------------------------------

#: The package's layers, top first. A module may import only from layers below its own; inside a
#: layer marked ``peers`` its folders and modules may import each other too (the cycle tests keep
#: that one-way). The stage folders among themselves: the training loop loads what publish wrote
#: and rolls harnesses out, publish exports what validation judged, harnesses act through the
#: agent's tool set (envs), validation gets its policy rollouts from the composition layer and
#: grades with verify, verify grades in runtime's sandboxes. Mining is a stage whose output (tasks) the
#: others read, never its code.
LAYERS: tuple[tuple[frozenset[str], bool], ...] = (
    (frozenset({"repo2env.__main__"}), False),
    (frozenset({"repo2env.cli"}), False),
    (frozenset({"repo2env.pipeline"}), False),  # the composition layer: cli, batch and demos call it
    (frozenset({"repo2env.train"}), False),
    (frozenset({"repo2env.publish"}), False),
    # Harness adapters drive a sandbox through the agent's one tool set (envs): harness sits on envs.
    (frozenset({"repo2env.harness"}), False),
    (frozenset({"repo2env.validate", "repo2env.envs", "repo2env.mine"}), False),
    (frozenset({"repo2env.verify"}), False),
    (frozenset({"repo2env.runtime", "repo2env.demo"}), False),
    (frozenset({"repo2env.languages"}), False),
    (frozenset({"repo2env.patches", "repo2env.jsonl", "repo2env.instruction", "repo2env.dataset_rows",
                "repo2env.leakage", "repo2env.folders"}), True),
    (frozenset({"repo2env", "repo2env.models", "repo2env.errors", "repo2env.outcomes", "repo2env.settings",
                "repo2env.defaults", "repo2env.pysyntax"}), True),
)

#: Imports that point up or sideways today, each with the helper removing it (issue 21). Nothing
#: may be added here: a new one is a module in the wrong layer.
#: None left: the test-path rules moved into repo2env/languages/, and one tool set
#: (envs/tools.py, envs/policy.py) serves policy rollouts and RepoEnv.
KNOWN_UPWARD_IMPORTS: set[tuple[str, str]] = set()
#: Private names imported across folders, each with the helper removing it (none left: the Harbor
#: export reads the grading specification's public API since the grader helper's change).
KNOWN_PRIVATE_IMPORTS: set[tuple[str, str]] = set()


def _layer_of(unit: str) -> int:
    for index, (units, _) in enumerate(LAYERS):
        if unit in units:
            return index
    raise AssertionError(f"{unit} is in no layer of tests/test_layout.py's LAYERS: give it one")


def _module_of(name: str, modules: set[str]) -> str:
    """The module an imported name lives in (``repo2env.__version__`` -> ``repo2env``)."""
    while name not in modules and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def _module_imports() -> dict[str, set[str]]:
    """Every module's imported repo2env modules and names (``from repo2env.x import y`` gives
    ``repo2env.x.y``), lazy and TYPE_CHECKING imports included."""
    found: dict[str, set[str]] = defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                    and (node.module == "repo2env" or node.module.startswith("repo2env.")):
                found[module].update(f"{node.module}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Import):
                found[module].update(alias.name for alias in node.names if alias.name.startswith("repo2env."))
    return found


def _known(source: str, target: str, allowed: set[tuple[str, str]]) -> bool:
    return any(source == known_source and (target == known_target or target.startswith(known_target + "."))
               for known_source, known_target in allowed)


def test_imports_point_down_the_layers():
    upward = []
    used = set()
    modules = {".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
               for path in PACKAGE.rglob("*.py")}
    for source, targets in sorted(_module_imports().items()):
        source_layer = _layer_of(_unit(source))
        for target in sorted({_module_of(name, modules) for name in targets}):
            if _unit(target) == _unit(source):
                continue
            target_layer = _layer_of(_unit(target))
            if target_layer > source_layer or (target_layer == source_layer and LAYERS[source_layer][1]):
                continue
            known = next((pair for pair in KNOWN_UPWARD_IMPORTS if _known(source, target, {pair})), None)
            if known:
                used.add(known)
                continue
            upward.append(f"{source} -> {target}")
    assert not upward, "imports that point up or sideways (see LAYERS):\n" + "\n".join(upward)
    # A known edge its helper removed leaves the list too, so that it cannot come back unnoticed.
    assert used == KNOWN_UPWARD_IMPORTS, f"no longer imported, drop from KNOWN_UPWARD_IMPORTS: {KNOWN_UPWARD_IMPORTS - used}"


def test_no_private_name_is_imported_from_another_folder():
    private, used = [], set()
    for source, targets in sorted(_module_imports().items()):
        for target in sorted(targets):
            if not target.rsplit(".", 1)[-1].startswith("_") or target.endswith("__version__") \
                    or _unit(target) == _unit(source):
                continue
            known = next((pair for pair in KNOWN_PRIVATE_IMPORTS if _known(source, target, {pair})), None)
            if known:
                used.add(known)
            else:
                private.append(f"{source} imports {target}")
    assert not private, "\n".join(private)
    assert used == KNOWN_PRIVATE_IMPORTS, f"no longer imported, drop: {KNOWN_PRIVATE_IMPORTS - used}"


BENCHMARKS = PACKAGE.parent / "benchmarks"


def test_nothing_outside_the_backends_imports_docker():
    backends = PACKAGE / "runtime" / "backends"
    sources = [path for path in sorted(PACKAGE.rglob("*.py")) if backends not in path.parents]
    sources += sorted(BENCHMARKS.glob("*.py"))
    offenders = {str(path.relative_to(PACKAGE.parent)): sorted(name for name in _file_imports(path)
                                                               if name.split(".")[0] == "docker")
                 for path in sources}
    offenders = {path: names for path, names in offenders.items() if names}
    assert not offenders, f"talk to the engine through repo2env.runtime.backends (open_backend): {offenders}"
    assert any(name.split(".")[0] == "docker" for name in _file_imports(backends / "docker.py")), "the check sees imports"
    assert any(path.parent == BENCHMARKS for path in sources), "the check sees the benchmarks"


def test_the_benchmarks_open_their_backend_through_the_registry():
    """So that REPO2ENV_BACKEND (and a benchmark's --backend) choose it, as for every command."""
    offenders = {path.name: sorted(name for name in _file_imports(path)
                                   if name.startswith("repo2env.runtime.backends."))
                 for path in sorted(BENCHMARKS.glob("*.py"))}
    offenders = {name: modules for name, modules in offenders.items() if modules}
    assert not offenders, f"open the backend with repo2env.runtime.backends.open_backend: {offenders}"
    assert "repo2env.runtime.backends" in _file_imports(BENCHMARKS / "executor_tasks.py"), "the check sees imports"


#: What a command module may import of the package: the composition layer (repo2env.pipeline's
#: compose, batch, demo and train_demo), the defaults it shows and the errors it raises. The
#: exceptions are commands that are their own composition: ``demo init`` builds the demo repository,
#: ``serve`` serves a catalog, ``train`` first checks its extra; the backend registry, which opens
#: the backend ``--backend`` names for the stages; and the machine's commands (cli/runtime.py:
#: doctor, runtime, images) talk to the runtime itself.
CLI_MAY_IMPORT = {"repo2env", "repo2env.defaults", "repo2env.errors", "repo2env.pipeline", "repo2env.pipeline.compose",
                  "repo2env.pipeline.batch", "repo2env.pipeline.demo", "repo2env.pipeline.train_demo",
                  "repo2env.runtime.backends"}
CLI_OWN_COMPOSITION = {"repo2env.demo", "repo2env.envs.catalog", "repo2env.envs.openenv_server", "repo2env.train.run"}


def test_the_cli_calls_the_composition_layer_not_the_stages():
    offenders = {}
    for path in sorted((PACKAGE / "cli").glob("*.py")):
        if path.name == "runtime.py":
            continue
        stages = {name for name in _file_imports(path) if name.startswith("repo2env")
                  and not name.startswith("repo2env.cli")} - CLI_MAY_IMPORT - CLI_OWN_COMPOSITION
        if stages:
            offenders[path.name] = sorted(stages)
    assert not offenders, f"CLI modules importing stages instead of repo2env.pipeline.compose: {offenders}"


# --- a language is a profile: stages ask it, never name it ---------------------------------------

#: The stages that must reach a language through the registry (repo2env.languages.get_profile) and
#: its profile's answers, never by its name (issue 22).
LANGUAGE_BLIND = ("mine", "runtime", "verify", "validate", "publish", "envs", "harness", "pipeline")
#: Language modules a stage still imports by path, each with its reason. Keep it short: a new one is
#: a question for the profile.
KNOWN_LANGUAGE_IMPORTS = {
    # The per-repository environment override every build recipe takes (batch specs' ``env:``) still
    # lives in the Python profile's spec package, beside the Python versions it checks.
    "repo2env.languages.python.spec.overrides": {"repo2env/runtime/build.py", "repo2env/pipeline/compose.py",
                                                 "repo2env/pipeline/spec.py", "repo2env/pipeline/stages.py"},
    # The host filter's base rules, applied to every task's patch, are Python's (test paths, pytest's
    # configuration files, startup modules, package metadata): they guard the grader's own pytest
    # path, which has no profile object where it also runs (a Harbor verifier's restore.py).
    "repo2env.languages.python.paths": {"repo2env/verify/filtering.py"},
    "repo2env.languages.python.runner": {"repo2env/verify/filtering.py"},
}


def _language_words() -> set[str]:
    from repo2env.languages import get_profile, language_names

    return {word for name in language_names() for word in (name, get_profile(name).title)}


def language_name_comparisons(tree: ast.AST, words: set[str]) -> list[str]:
    """The comparisons in ``tree`` with a language's name (or title) as a string literal on one side
    (``task.language != "python"``, ``language in ("python", "javascript")``), and ``case "python":``."""
    def names_a_language(node: ast.AST) -> bool:
        if isinstance(node, ast.Constant):
            return node.value in words
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(names_a_language(element) for element in node.elts)
        return False

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(names_a_language(side) for side in [node.left, *node.comparators]):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.MatchValue) and names_a_language(node.value):
            found.append(f"{node.lineno}: case {ast.unparse(node.value)}")
    return found


def test_the_scan_sees_a_language_branch():
    words = _language_words()
    assert {"python", "javascript"} <= words
    code = 'if task.language != "python":\n    pass\nok = lang in ("go", "javascript")\nsame = runner == "pytest"\n'
    assert [line.split(":")[0] for line in language_name_comparisons(ast.parse(code), words)] == ["1", "3"]
    matched = 'match language:\n    case "javascript":\n        pass\n'
    assert language_name_comparisons(ast.parse(matched), words) == ["2: case 'javascript'"]


def test_no_stage_branches_on_a_language_name():
    words = _language_words()
    offenders = {}
    for stage in LANGUAGE_BLIND:
        for path in sorted((PACKAGE / stage).rglob("*.py")):
            found = language_name_comparisons(ast.parse(path.read_text(encoding="utf-8")), words)
            if found:
                offenders[str(path.relative_to(PACKAGE.parent))] = found
    assert not offenders, f"ask the language's profile (repo2env.languages.get_profile) instead: {offenders}"


def test_stages_reach_a_language_through_the_registry():
    from repo2env.languages import language_names

    languages = set(language_names())
    found: dict[str, set[str]] = defaultdict(set)
    for stage in LANGUAGE_BLIND:
        for path in sorted((PACKAGE / stage).rglob("*.py")):
            for name in _file_imports(path):
                parts = name.split(".")
                if parts[:2] == ["repo2env", "languages"] and len(parts) > 2 and parts[2] in languages:
                    found[name].add(str(path.relative_to(PACKAGE.parent)))
    unknown = {name: sorted(paths - KNOWN_LANGUAGE_IMPORTS.get(name, set())) for name, paths in found.items()}
    unknown = {name: paths for name, paths in unknown.items() if paths}
    assert not unknown, f"ask the profile (repo2env.languages.get_profile) instead of importing: {unknown}"
    # An import that went away leaves the list too, so that it cannot come back unnoticed.
    assert {name: found.get(name, set()) for name in KNOWN_LANGUAGE_IMPORTS} == KNOWN_LANGUAGE_IMPORTS
