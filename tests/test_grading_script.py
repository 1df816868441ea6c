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
    assert set(shipped) == set(GRADING_SCRIPT_FILES) == {"grade.sh", "run_tests.sh", "restore.py"}
    assert shipped["grade.sh"] == (SCRIPTS / "grade.sh").read_text(), "the grader copies the file as it is"
    for script in ("grade.sh", "run_tests.sh"):
        assert subprocess.run(["bash", "-n", str(SCRIPTS / script)], capture_output=True).returncode == 0
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


def run_restore(repo: Path, tmp_path: Path, *, allowed: list[str] | None, gold_patch_paths=(), protected=False,
                hidden_tests: str = HIDDEN_TESTS, canaries: dict | None = None):
    """restore.py as grade.sh runs it, with its inputs laid out as the grader lays them out."""
    inputs, private = tmp_path / "inputs", tmp_path / "private"
    inputs.mkdir()
    private.mkdir()
    shutil.copy(SCRIPTS / "restore.py", inputs / "restore.py")
    (inputs / "agent.diff").write_text(git(repo, "diff", "HEAD"))
    if allowed is not None:
        (inputs / "allowed").write_text("\0".join(allowed))
    (private / "test.diff").write_text(hidden_tests)
    canary = {"name": "test_answer_twice_value", "container": [], "source": "def test_answer_twice_value():\n"
              "    assert len('abc') == 3\n", "generated": True, "near": ["test_new"]}
    (private / "canaries.json").write_text(json.dumps(canaries if canaries is not None else {"tests/test_answer.py": [canary]}))
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

    from repo2env.publish.harbor import verifier_library

    package = Path(__file__).resolve().parents[1] / "repo2env"
    # pytest's verifier, and one that reads a JavaScript runner's reports too.
    library = verifier_library("repo2env.languages.javascript.runners")
    assert set(verifier_library()) < set(library) and "verify/junit.py" in library
    shipped = {"repo2env." + name.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
               for name in library} | {"repo2env"}
    for name in library:
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


def test_restore_keeps_the_snapshots_pytest_tables_in_every_pyproject_below_the_root(snapshot, tmp_path):
    """A package's own pyproject.toml is the configuration pytest reads for tests inside that
    package (grade.sh names the nearest one): below the root, as at it, only the snapshot's pytest
    tables count; a new one that configures pytest is removed; one made a link is reverted."""
    (snapshot / "src" / "pkg" / "pyproject.toml").write_text('[tool.black]\nline-length = 100\n')
    (snapshot / "src" / "other").mkdir()
    (snapshot / "src" / "other" / "pyproject.toml").write_text('[tool.black]\nline-length = 90\n')
    (snapshot / "evil.toml").write_text('[tool.pytest.ini_options]\naddopts = "-p pkg.plugin"\n')
    git(snapshot, "add", "-A")
    git(snapshot, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "packages with their own pyproject")
    (snapshot / "src" / "pkg" / "pyproject.toml").write_text(
        '[tool.black]\nline-length = 120\n\n[tool.pytest.ini_options]\naddopts = "-p pkg.plugin"\n')
    (snapshot / "src" / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "-p pkg.plugin"\n')
    (snapshot / "src" / "other" / "pyproject.toml").unlink()
    (snapshot / "src" / "other" / "pyproject.toml").symlink_to("../../evil.toml")
    git(snapshot, "add", "-N", "src/pyproject.toml")
    changed = ["src/pkg/pyproject.toml", "src/pyproject.toml", "src/other/pyproject.toml"]
    done, _ = run_restore(snapshot, tmp_path, allowed=changed)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (snapshot / "src" / "pkg" / "pyproject.toml").read_text().strip() == "[tool.black]\nline-length = 120", \
        "the pytest table goes, the package's other change stays"
    assert not (snapshot / "src" / "pyproject.toml").exists(), "a new pyproject that configures pytest is removed"
    other = snapshot / "src" / "other" / "pyproject.toml"
    assert not other.is_symlink() and other.read_text() == "[tool.black]\nline-length = 90\n"


def _pick_config(root: Path, dirs: list[str]) -> str:
    """The configuration run_tests.sh names for tests whose search folders are ``dirs``."""
    from repo2env.verify.spec import PYTEST_CONFIG_FILES

    settings = {"config_dirs": [str(root / folder) for folder in dirs],
                "config_names": [config.name for config in PYTEST_CONFIG_FILES],
                "config_sections": [config.section for config in PYTEST_CONFIG_FILES]}
    (root.parent / "settings.json").write_text(json.dumps(settings))
    script = (f'. {SCRIPTS / "run_tests.sh"}; read_settings {root.parent / "settings.json"} || exit 9; '
              'pick_config; printf "%s" "${config[@]}"')
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.removeprefix("-c").replace(str(root) + "/", "")


def test_the_configuration_is_pytests_own_choice_nearest_first(tmp_path):
    root = tmp_path / "testbed"
    (root / "src" / "pkg" / "tests").mkdir(parents=True)
    dirs = ["src/pkg/tests", "src/pkg", "src", "."]
    assert _pick_config(root, dirs) == ""
    (root / "setup.cfg").write_text("[metadata]\nname = x\n")
    (root / "tox.ini").write_text("[tox]\nenvlist = py\n")
    assert _pick_config(root, dirs) == "", "files without pytest's section are not pytest's"
    (root / "tox.ini").write_text("[tox]\nenvlist = py\n\n[pytest]\naddopts = -q\n")
    assert _pick_config(root, dirs) == "tox.ini"
    (root / "src" / "pkg" / "pyproject.toml").write_text("[tool.black]\n")
    assert _pick_config(root, dirs) == "tox.ini"
    (root / "src" / "pkg" / "pyproject.toml").write_text("[tool.pytest.ini_options]\naddopts = '-q'\n")
    assert _pick_config(root, dirs) == "src/pkg/pyproject.toml", "the package's own, nearest the tests"
    (root / "src" / "pkg" / "pytest.ini").write_text("")
    assert _pick_config(root, dirs) == "src/pkg/pytest.ini", "pytest.ini counts even when empty, and before pyproject"


INVISIBLE_SUITE = {
    "conftest.py": 'pytest_plugins = ["pytester"]\n',
    "test_inner.py": '''import os
import subprocess
import sys


def test_the_environment_and_the_path_are_the_projects():
    assert "PYTEST_PLUGINS" not in os.environ
    assert os.environ.get("PYTHONPATH") == "/kept/by/the/image"
    assert not [entry for entry in sys.path if "outcome-plugin" in entry]
    assert not [name for name in sys.modules if name.startswith("repo2env_outcomes")]


def test_a_pytest_started_in_a_subprocess_runs_as_it_would(tmp_path):
    (tmp_path / "test_child.py").write_text("def test_child():\\n    pass\\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_pytester_sessions_see_no_extra_plugin(pytester):
    pytester.makepyfile("def test_inside():\\n    pass\\n")
    pytester.runpytest().assert_outcomes(passed=1)
    pytester.runpytest_subprocess().assert_outcomes(passed=1)
    config = pytester.parseconfig()
    assert not [name for name, _ in config.pluginmanager.list_name_plugin() if "repo2env" in str(name)]
''',
}


def test_the_outcome_plugin_leaves_nothing_the_tests_or_their_children_can_see(tmp_path):
    """grade.sh names the plugin in PYTEST_PLUGINS and its folder in PYTHONPATH; once loaded, it
    takes both out of the environment, its folder out of sys.path and itself out of sys.modules, so
    a pytest the tests start (in a subprocess, or pytester's, in process or not) runs as it would
    without the grader, and only the outer session's outcomes reach the stream (issue 19.1)."""
    import threading

    from repo2env.verify.tamper import PLUGIN_SOURCE, parse_stream

    suite = tmp_path / "suite"
    suite.mkdir()
    for name, text in INVISIBLE_SUITE.items():
        (suite / name).write_text(text)
    plugin_dir, fifo = tmp_path / "outcome-plugin", tmp_path / "outcomes.fifo"
    plugin_dir.mkdir()
    (plugin_dir / "repo2env_outcomes_abc123.py").write_text(PLUGIN_SOURCE.format(fifo=str(fifo)))
    os.mkfifo(fifo)
    collected = []

    def collect():  # as the root collector does: open, unlink, read to the end
        with open(fifo, "rb") as stream:
            fifo.unlink()
            collected.append(stream.read().decode())

    reader = threading.Thread(target=collect)
    reader.start()
    # Not this suite's xdist worker variables: the plugin keeps quiet in an xdist worker (the controller
    # reports), and a grading's pytest is no worker of ours.
    environment = {**{name: value for name, value in os.environ.items() if not name.startswith("PYTEST_XDIST_")},
                   "PYTHONPATH": f"{plugin_dir}:/kept/by/the/image", "PYTEST_PLUGINS": "repo2env_outcomes_abc123"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_inner.py"], cwd=suite,
                          env=environment, capture_output=True, text=True, timeout=180)
    reader.join(30)
    assert done.returncode == 0, done.stdout + done.stderr
    stream = parse_stream(collected[0])
    assert stream.exit_status == 0 and stream.unreadable_lines == 0
    assert sorted(stream.reports) == sorted(f"test_inner.py::{name}" for name in (
        "test_the_environment_and_the_path_are_the_projects", "test_a_pytest_started_in_a_subprocess_runs_as_it_would",
        "test_pytester_sessions_see_no_extra_plugin")), "the inner sessions' tests never reach the stream"


CLASS_TESTS = "".join(line + "\n" for line in [
    "diff --git a/tests/test_answer.py b/tests/test_answer.py", "--- a/tests/test_answer.py",
    "+++ b/tests/test_answer.py", "@@ -3,3 +3,16 @@", " ", " def test_old():", "     assert answer()",
    "+", "+", "+class TestAnswer:", "+    def test_setup(self):", "+        assert answer() is not None", "+",
    '+    @pytest.mark.parametrize("word", ["forty", "two"])', "+    def test_words(self, word):",
    '+        assert str(answer()) + word == "42forty"', "+", "+", "+def test_new():",
    '+    assert str(answer()) == "4242"'])


def test_the_canaries_are_placed_beside_the_prs_tests_and_collected_where_they_belong(snapshot, tmp_path):
    """A plan drawn from the hidden tests, placed by restore.py, collected by a real pytest: every
    canary id is a test of its module or class, copies keep their decorators and indentation."""
    import random

    from repo2env.patches import parse
    from repo2env.verify.canary_maker import canary_modules, plan_canaries

    (snapshot / "tests" / "test_answer.py").write_text("import pytest\nfrom pkg import answer\n\n\ndef test_old():\n"
                                                       "    assert answer()\n")
    git(snapshot, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "pytest imported")
    f2p = ["tests/test_answer.py::TestAnswer::test_words[forty]", "tests/test_answer.py::test_new"]
    known = [*f2p, "tests/test_answer.py::test_old", "tests/test_answer.py::TestAnswer::test_setup"]
    hidden = CLASS_TESTS.replace("@@ -3,3 +3,16 @@", "@@ -4,3 +4,16 @@")
    plan = plan_canaries(canary_modules(parse(hidden), f2p, known), known, random.Random(3))
    done, _ = run_restore(snapshot, tmp_path, allowed=[], hidden_tests=hidden, canaries=plan.definitions)
    assert done.returncode == 0, done.stdout + done.stderr
    source = (snapshot / "tests" / "test_answer.py").read_text()
    compile(source, "test_answer.py", "exec")
    collected = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-o", "addopts=", "-p", "no:cacheprovider",
                                "tests/test_answer.py"], cwd=snapshot, capture_output=True, text=True, timeout=120,
                               env={**os.environ, "PYTHONPATH": str(snapshot / "src")})
    ids = set(collected.stdout.split())
    assert {canary.test_id for canary in plan.canaries} <= ids, (collected.stdout, source)
    assert len(ids & set(known)) == len(known)


def test_the_hosts_shell_settings_are_what_read_settings_makes_of_the_json(tmp_path):
    """grade.json.sh (sourced, no interpreter start) sets exactly what read_settings's program sets
    from grade.json: ids with spaces, quotes, brackets, backslashes, newlines and undecodable bytes."""
    from repo2env.verify.spec import shell_assignments

    settings = {"test_ids": ["t.py::test_a[x y]", "t.py::test_b['q\"]", "t.py::c[\\\\n $HOME `id`]", "t.py::d[\n]",
                             "t.py::e[\udcff]"],
                "timeout_s": 300.0, "count": 3, "flag": True, "empty": [], "text": "a 'b' \"c\" $(x)",
                "not-a-name": "x", "nested": {"a": 1}, "tuple": ("x", "y z")}
    (tmp_path / "settings.json").write_text(json.dumps(settings))
    names = "test_ids timeout_s count flag empty text tuple nested"
    show = (f"for name in {names}; do declare -p $name 2>/dev/null || echo unset $name; done; "
            'printf "%s\\0" "${test_ids[@]}"')

    def state(script: str) -> bytes:
        done = subprocess.run(["bash", "-c", f". {SCRIPTS / 'run_tests.sh'}; {script}; {show}"], capture_output=True,
                              timeout=30)
        assert done.returncode == 0, done.stderr
        return done.stdout

    from_python = state(f"read_settings {tmp_path / 'settings.json'} || exit 9")
    (tmp_path / "settings.json.sh").write_bytes(shell_assignments(settings).encode("utf-8", "surrogateescape"))
    from_host = state(f"read_settings {tmp_path / 'settings.json'} {tmp_path / 'settings.json.sh'} || exit 9")
    assert state(f"read_settings {tmp_path / 'settings.json'} || exit 9") == from_python, \
        "a file beside the settings is read only when the caller names it (derivation never does)"
    assert b"\0t.py::d[\n]\0t.py::e[\xff]\0" in from_python and b"unset nested" in from_python
    assert from_host == from_python
    (tmp_path / "settings.json.sh").write_text("test_ids=(forged)\n")
    assert b"forged" in state(f"read_settings {tmp_path / 'settings.json'} {tmp_path / 'settings.json.sh'} || exit 9"), \
        "the test is able to tell which file was read"


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="runs the trap as another user")
def test_the_exit_trap_says_nothing_when_it_cannot_open_the_fifo():
    """grade.sh's EXIT trap opens the collector's FIFO to end a collector still waiting for a writer.
    The collector may have taken the FIFO away in between (then the shell would create a file in
    root's folder), or it may not be the agent's to open: whatever the open says must not follow the
    trailer, or the grading reads as unfinished and earns nothing (seen once on the demo, a stub:
    'cannot create ....fifo: Permission denied' after the trailer)."""
    import tempfile

    trap = next(line for line in grading_scripts()["grade.sh"].splitlines() if line.startswith("trap "))
    folder = Path(tempfile.mkdtemp(prefix="repo2env-trap-"))
    try:
        folder.chmod(0o755)
        fifo = folder / "grade.fifo"
        os.mkfifo(fifo, 0o600)  # root's, as a FIFO on its way out looks to the agent's user
        script = f"fifo={str(fifo)!r}\n{trap}\nprintf 'REPO2ENV-GRADE-TRAILER 000 000000000000\\n'\n"
        done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "bash", "-c", script],
                              capture_output=True, text=True, timeout=30)
        assert done.stdout + done.stderr == "REPO2ENV-GRADE-TRAILER 000 000000000000\n", done
        fifo.unlink()  # gone: the open would create a file where the agent may not
        done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "bash", "-c",
                               script.replace('[ -p "$fifo" ] && ', "")], capture_output=True, text=True, timeout=30)
        assert done.stdout + done.stderr == "REPO2ENV-GRADE-TRAILER 000 000000000000\n", done
    finally:
        shutil.rmtree(folder)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="runs the collector as root and "
                    "its writer as another user")
def test_the_collectors_fifo_appears_only_once_the_tests_user_may_open_it():
    """The collector (root) makes the grading's FIFO with ``mkfifo -m 622``: two system calls, and
    between them the FIFO is root's alone (umask 077). A grading script that saw it then went on,
    and its test command could not open it ('cannot create ....fifo: Permission denied': the run
    earned nothing, on a loaded machine about once in a thousand gradings). Here ``mkfifo`` pauses
    between its two steps: the writer, which goes as soon as the FIFO is there, must still get its
    line through."""
    import tempfile
    import threading

    from repo2env.verify.tamper import COLLECTOR_SCRIPT

    folder = Path(tempfile.mkdtemp(prefix="repo2env-collector-"))
    try:
        folder.chmod(0o755)
        slow = folder / "slow-bin"
        slow.mkdir()
        real = shutil.which("mkfifo")
        # mkfifo -m MODE PATH, its two steps apart: the FIFO made under the umask, the mode later.
        (slow / "mkfifo").write_text(f'#!/bin/sh\n{real} "$3" && sleep 2 && chmod "$2" "$3"\n')
        (slow / "mkfifo").chmod(0o755)
        fifo = folder / "grade" / "x.fifo"
        fifo.parent.mkdir(mode=0o755)
        fifo.parent.chmod(0o755)
        collected: dict = {}

        def collect() -> None:
            collected["done"] = subprocess.run(["/bin/sh", "-c", COLLECTOR_SCRIPT, str(fifo)], capture_output=True,
                                               text=True, timeout=60, env={**os.environ, "PATH": f"{slow}:{os.environ['PATH']}"})

        collector = threading.Thread(target=collect)
        collector.start()
        writer = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c",
             'n=0; until [ -p "$0" ]; do [ $n -lt 2000 ] || exit 9; n=$((n+1)); sleep 0.01; done; '
             'echo "an outcome" > "$0"', str(fifo)], capture_output=True, text=True, timeout=60)
        if writer.returncode != 0:
            subprocess.run(["sh", "-c", ': > "$0"', str(fifo)], timeout=10)  # let the collector go
        collector.join(60)
        assert writer.returncode == 0, writer.stderr
        assert collected["done"].stdout == "an outcome\n", collected["done"]
        assert not fifo.exists() and not list(fifo.parent.iterdir()), "the collector leaves nothing behind"
    finally:
        shutil.rmtree(folder)
