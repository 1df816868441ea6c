"""The grading script as files (repo2env/verify/scripts/): shipped with the package, lintable, and
restore.py run on its own, outside Docker, on small git repositories built here.

grade.sh itself stops every process of its user when the tests end (``kill -STOP -1``), so it only
ever runs inside a container: the grader's tests (test_grade.py, test_hacks.py) and the Harbor
export's test (test_harbor.py) run it there.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from repo2env.verify.filtering import RUNNER_PATTERN, is_protected_path, protected_path_pattern
from repo2env.verify.grader import GRADING_SCRIPT_FILES, grading_scripts

SCRIPTS = Path(__file__).resolve().parents[1] / "repo2env" / "verify" / "scripts"


def test_the_package_ships_the_script_files_and_they_lint():
    shipped = grading_scripts()
    assert set(shipped) == set(GRADING_SCRIPT_FILES) == {"grade.sh", "restore.py"}
    assert shipped["grade.sh"] == (SCRIPTS / "grade.sh").read_text(), "the grader copies the file as it is"
    assert subprocess.run(["bash", "-n", str(SCRIPTS / "grade.sh")], capture_output=True).returncode == 0
    compile(shipped["restore.py"], "restore.py", "exec")
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent))
    checked = subprocess.run([ruff, "check", "--no-cache", str(SCRIPTS)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout
    # The exit statuses and the trailer the grader reads are the script's own.
    for status in ("exit 90", "91|92) exit", "REPO2ENV-GRADE-TRAILER %03d %012d"):
        assert status in shipped["grade.sh"]
    # Standard library only (the sandbox's system Python): every import is a stdlib module.
    imported = set(re.findall(r"^import (\w+)", shipped["restore.py"], re.MULTILINE))
    assert imported and imported <= set(sys.stdlib_module_names)


def test_protected_path_pattern_agrees_with_the_filter():
    """The in-sandbox rule (Harbor, no host filter) is the filter's, on every path made of these parts."""
    pattern = re.compile(protected_path_pattern())
    parts = ["src", "tests", "Test", "pkg", "conftest.py", "a.py", "test_x.py", "x_test.py", "tests.py", "TOX.INI",
             "setup.cfg", "mod.pth", "X.PYC", "__pycache__", ".git", "..", "sitecustomize.py", "UserCustomize",
             "foo.dist-info", "Bar.EGG-INFO", "x.egg", "pytest.ini", ".pytest.toml", "pyproject.toml", "testing",
             "unit_tests", "test_data", "docs", "latest", "contest.py", "pytest_plugin.py", "_pytest", "noxfile.py"]
    paths = ["/".join(combo) for depth in (1, 2, 3) for combo in itertools.product(parts, repeat=depth)]
    disagree = [path for path in paths if bool(pattern.search(path)) != is_protected_path(path)]
    assert not disagree, disagree[:10]
    assert sum(map(is_protected_path, paths)) > len(paths) // 3, "both kinds are covered"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


@pytest.fixture
def snapshot(tmp_path):
    """A one-commit repository like a task's /testbed, with an agent's changes on top."""
    repo = tmp_path / "testbed"
    (repo / "src" / "pkg").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "src" / "pkg" / "__init__.py").write_text("def answer():\n    return 1\n")
    (repo / "tests" / "test_answer.py").write_text("from pkg import answer\n\n\ndef test_old():\n    assert answer()\n")
    (repo / "pyproject.toml").write_text('[project]\nname = "pkg"\n\n[tool.pytest.ini_options]\naddopts = "-q"\n')
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "snapshot")
    return repo


HIDDEN_TESTS = "".join(line + "\n" for line in [
    "diff --git a/tests/test_answer.py b/tests/test_answer.py", "--- a/tests/test_answer.py",
    "+++ b/tests/test_answer.py", "@@ -3,3 +3,7 @@", " ", " def test_old():", "     assert answer()",
    "+", "+", "+def test_new():", "+    assert answer() == 42"])


def run_restore(repo: Path, tmp_path: Path, *, allowed: list[str] | None, gold_patch_paths=(), protected=False):
    """restore.py as grade.sh runs it, with its inputs laid out as the grader lays them out."""
    inputs, private = tmp_path / "inputs", tmp_path / "private"
    inputs.mkdir()
    private.mkdir()
    shutil.copy(SCRIPTS / "restore.py", inputs / "restore.py")
    (inputs / "agent.diff").write_text(git(repo, "diff", "HEAD"))
    if allowed is not None:
        (inputs / "allowed").write_text("\0".join(allowed))
    (private / "test.diff").write_text(HIDDEN_TESTS)
    canary = "\n\ndef test_answer_twice_value():\n    assert len('abc') == 3\n"
    (private / "canaries.json").write_text(json.dumps({"tests/test_answer.py": [canary]}))
    settings = {"inputs": str(inputs), "private": str(private), "gold_paths": list(gold_patch_paths),
                "runner_pattern": RUNNER_PATTERN, "gold_references": []}
    if protected:
        settings["protected_pattern"] = protected_path_pattern()
    (inputs / "grade.json").write_text(json.dumps(settings))
    environment = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    done = subprocess.run([sys.executable, "-I", "-S", str(inputs / "restore.py"), str(inputs / "grade.json")],
                          cwd=repo, capture_output=True, text=True, env=environment, timeout=60)
    return done, private


@pytest.mark.parametrize("mode", ["allowed", "protected_pattern"])
def test_restore_reverts_what_the_patch_may_not_change_and_places_hidden_tests(snapshot, tmp_path, mode):
    (snapshot / "src" / "pkg" / "__init__.py").write_text("def answer():\n    return 42\n")
    (snapshot / "tests" / "test_answer.py").write_text("def test_old():\n    pass\n")  # a test rewritten
    (snapshot / "tests" / "conftest.py").write_text("collect_ignore = ['test_answer.py']\n")
    (snapshot / "helper.py").write_text("VALUE = 1\n")  # a new top-level module the gold patch does not add
    pyproject = (snapshot / "pyproject.toml").read_text()
    (snapshot / "pyproject.toml").write_text(pyproject.replace('addopts = "-q"', 'addopts = "-p no:python"')
                                             + '\n[tool.black]\nline-length = 100\n')
    git(snapshot, "add", "-N", "tests/conftest.py", "helper.py")
    kept = ["src/pkg/__init__.py", "helper.py", "pyproject.toml"]
    done, private = run_restore(snapshot, tmp_path, allowed=kept if mode == "allowed" else None,
                                protected=mode == "protected_pattern")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "return 42" in (snapshot / "src" / "pkg" / "__init__.py").read_text(), "the fix stays"
    assert not (snapshot / "tests" / "conftest.py").exists() and not (snapshot / "helper.py").exists()
    assert "removed helper.py (a new top-level module helper" in done.stdout
    tests = (snapshot / "tests" / "test_answer.py").read_text()
    assert "def test_new():" in tests and "assert answer()\n" in tests, "the snapshot's tests, then the hidden ones"
    assert "def test_answer_twice_value():" in tests, "the canary is placed"
    ast_ok = compile(tests, "test_answer.py", "exec")
    assert ast_ok is not None
    restored = (snapshot / "pyproject.toml").read_text()
    assert 'addopts = "-q"' in restored and "[tool.black]" in restored, "pytest's section restored, the rest kept"
    assert list(private.iterdir()) == [], "the hidden tests and canaries are deleted once used"


def test_restore_refuses_runner_references_and_a_gold_module_stays(snapshot, tmp_path):
    (snapshot / "src" / "pkg" / "__init__.py").write_text("import atexit\n\ndef answer():\n    return 42\n")
    (snapshot / "helper.py").write_text("VALUE = 1\n")
    git(snapshot, "add", "-N", "helper.py")
    done, _ = run_restore(snapshot, tmp_path, allowed=["src/pkg/__init__.py", "helper.py"], gold_patch_paths=["helper.py"])
    assert done.returncode == 92 and 'REPO2ENV-RUNNER-REFERENCES ["atexit"]' in done.stdout
    assert (snapshot / "helper.py").exists(), "a new top-level name the gold patch adds too is kept"


def test_the_harbor_verifier_library_imports_only_the_standard_library_and_itself():
    """What a Harbor task's tests/lib/ holds is imported by the image's own Python, with nothing but
    the standard library: a module-level import of another repo2env module it does not ship (say,
    the patch model) breaks every published verifier. Checked here without Docker, on the AST."""
    import ast

    from repo2env.publish.harbor import VERIFIER_LIBRARY

    package = Path(__file__).resolve().parents[1] / "repo2env"
    shipped = {"repo2env." + name.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
               for name in VERIFIER_LIBRARY} | {"repo2env"}
    for name in VERIFIER_LIBRARY:
        tree = ast.parse((package / name).read_text())
        for node in tree.body:  # module level only: a function may import on the host
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                modules = [node.module]
            else:
                continue
            for module in modules:
                assert module.split(".")[0] in sys.stdlib_module_names or module in shipped, (name, module)
