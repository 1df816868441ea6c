"""Test ids of every odd shape survive the trip through pytest's JUnit XML and its command line.

A real pytest (the host's) collects and runs a suite made of odd ids; each id's outcome read back
from the XML must be its own, and selecting the ids on the command line must run exactly them.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from repo2env.models import TestStatus
from repo2env.validate.derive import COLLECT_SCRIPT, collection_error, read_collected_ids
from repo2env.verify.junit import junit_key, junit_keys, outcomes_for, selection_args, split_node_id

# Each parameter is (id-making value, passes?): every shape once passing and once failing, so an id
# that were matched to another test's row would show.
ODD_SUITE = {
    "tests/__init__.py": "",
    "tests/pkg/__init__.py": "",
    "tests/pkg/test_odd.py": '''
        import pytest

        SHAPES = ["a::b", "x/y.z", "a.b::C.d", "with space", "ünï-çødé", "€", "[inner]", "a]b", "a[b",
                  "::", "tab\\there", "new\\nline", "back\\\\slash", "quote'\\"", "x" * 150]

        @pytest.mark.parametrize("shape", SHAPES)
        @pytest.mark.parametrize("passes", [True, False])
        def test_shape(shape, passes):
            assert passes

        @pytest.mark.parametrize("passes", [True, False], ids=["long " + "y" * 400 + " :: ok", "long " + "y" * 400 + " :: ko"])
        def test_long_explicit_id(passes):
            assert passes

        @pytest.mark.parametrize("passes", [True, False], ids=["id with :: and [ and ] pass", "id with :: and [ and ] fail"])
        def test_explicit_ids(passes):
            assert passes

        class TestOuter:
            class TestInner:
                @pytest.mark.parametrize("passes", [True, False], ids=["p::q", "r::s"])
                def test_nested(self, passes):
                    assert passes

            def test_method(self):
                pass
    ''',
    "test_at_root.py": '''
        import pytest

        @pytest.mark.parametrize("passes", [True, False], ids=["root::pass", "root::fail"])
        def test_root(passes):
            assert passes
    ''',
}


def _write_suite(root: Path, files: dict[str, str], ini: str = "") -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    (root / "pytest.ini").write_text(f"[pytest]\n{ini}")


def _pytest(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=root,
                          capture_output=True, text=True, encoding="utf-8", timeout=120)


def _collected(root: Path) -> list[str]:
    """The ids as validation collects them (its collection script, run by the host's Python)."""
    script, ids_path = root.parent / "collect.py", root.parent / "ids.json"
    script.write_text(COLLECT_SCRIPT)
    subprocess.run([sys.executable, str(script), str(ids_path), "--collect-only", "-q", "-p", "no:cacheprovider"],
                   cwd=root, capture_output=True, timeout=120)
    return read_collected_ids(ids_path.read_text(encoding="utf-8"))


@pytest.mark.parametrize(("files", "is_error"), [
    ({"tests/typing_example.py": "x: int = 1\n"}, False),  # the touched file holds no test: no F2P, no error
    ({"tests/test_broken.py": "import nowhere_to_be_found\n\ndef test_a():\n    pass\n"}, True),
])
def test_a_collection_without_ids_is_an_error_unless_pytest_found_nothing_to_collect(tmp_path, files, is_error):
    root = tmp_path / "suite"
    _write_suite(root, files)
    ids_path = tmp_path / "ids.json"
    (tmp_path / "collect.py").write_text(COLLECT_SCRIPT)
    run = subprocess.run([sys.executable, str(tmp_path / "collect.py"), str(ids_path), "--collect-only", "-q",
                          "-p", "no:cacheprovider", *files], cwd=root, capture_output=True, text=True, timeout=120)
    ids_json = ids_path.read_text(encoding="utf-8")
    assert read_collected_ids(ids_json) == []
    error = collection_error(ids_json, run.stdout)
    assert (error is not None) == is_error, error
    assert collection_error("", "") is not None, "no report at all is an error"


def test_a_collection_error_names_the_module_and_its_error_and_a_fix_that_changes_the_packaging(tmp_path):
    """pallets/itsdangerous 104 moves the package into src/ and changes setup.py and setup.cfg: the
    install made at the base commit no longer imports it after the fix. The reason says so, with the
    module and pytest's error, instead of pytest's last line ("1 error in 0.08 seconds")."""
    root = tmp_path / "suite"
    _write_suite(root, {"tests/test_moved.py": "import moved_away\n\ndef test_a():\n    pass\n"})
    (tmp_path / "collect.py").write_text(COLLECT_SCRIPT)
    run = subprocess.run([sys.executable, str(tmp_path / "collect.py"), str(tmp_path / "ids.json"), "--collect-only",
                          "-q", "-p", "no:cacheprovider", "tests/test_moved.py"], cwd=root, capture_output=True,
                         text=True, timeout=120)
    ids_json = (tmp_path / "ids.json").read_text(encoding="utf-8")
    moved = collection_error(ids_json, run.stdout, ["moved_away.py", "setup.py", "src/moved_away/__init__.py"])
    named = "no test collected after the fix (tests/test_moved.py: ModuleNotFoundError: No module named 'moved_away')"
    assert moved.startswith(named + "; the fix changes setup.py: the project installed at the base commit"), moved
    assert collection_error(ids_json, run.stdout, ["moved_away.py"]) == named, "no packaging change, no word of it"


def _expected(test_id: str) -> TestStatus:
    passing = ("True" in test_id or "pass" in test_id or ":: ok" in test_id or "p::q" in test_id
               or test_id.endswith("test_method"))
    return TestStatus.PASSED if passing else TestStatus.FAILED


@pytest.mark.parametrize("ini", ["", "disable_test_id_escaping_and_forfeit_all_rights_to_community_support = true\n"],
                         ids=["escaped", "raw-unicode"])
def test_every_odd_id_reads_its_own_outcome(tmp_path, ini):
    tmp_path = tmp_path / "suite"
    _write_suite(tmp_path, ODD_SUITE, ini)
    test_ids = _collected(tmp_path)
    assert len(test_ids) == 2 * 15 + 2 + 2 + 2 + 1 + 2
    assert "tests/pkg/test_odd.py::test_shape[False-a::b]" in test_ids
    assert any(len(test_id) > 400 for test_id in test_ids), "pytest keeps an explicit long id whole"
    xml_path = tmp_path / "report.xml"
    _pytest(tmp_path, f"--junitxml={xml_path}", "-o", "junit_family=xunit2")
    outcomes, error = outcomes_for(test_ids, xml_path.read_text(encoding="utf-8"))
    assert error is None
    wrong = {test_id: status for test_id, status in outcomes.items() if status != _expected(test_id)}
    assert not wrong


def test_selecting_odd_ids_on_the_command_line_runs_exactly_them(tmp_path):
    tmp_path = tmp_path / "suite"
    _write_suite(tmp_path, ODD_SUITE)
    test_ids = _collected(tmp_path)
    chosen = [test_id for test_id in test_ids if "::" in split_node_id(test_id)[2] or " " in test_id
              or "[inner]" in test_id or "test_method" in test_id]
    xml_path = tmp_path / "report.xml"
    run = _pytest(tmp_path, f"--junitxml={xml_path}", "-o", "junit_family=xunit2", *selection_args(chosen))
    assert "not found" not in run.stdout + run.stderr
    outcomes, error = outcomes_for(chosen, xml_path.read_text(encoding="utf-8"))
    assert error is None and all(outcomes[test_id] == _expected(test_id) for test_id in chosen)


def test_node_ids_split_outside_brackets_only():
    assert split_node_id("tests/a.py::T::f[x::y]") == ("tests/a.py", ["T", "f"], "[x::y]")
    assert split_node_id("tests/a.py::f[a[b]") == ("tests/a.py", ["f"], "[a[b]")
    assert split_node_id("README.rst") == ("README.rst", [], "")
    assert junit_key("tests/a.py::T::f[x::y.z/w]") == ("tests.a.T", "f[x::y.z/w]")
    assert junit_key("a.py::f[a.b::C.d]") == ("a", "f[a.b::C.d]")
    assert junit_key("src/pkg/mod.py::pkg.mod.func") == ("src.pkg.mod", "pkg.mod.func"), "a doctest's name keeps its dots"
    assert junit_key("tests/a.py::TestX::()::test_y") == ("tests.a.TestX", "test_y"), "pytest < 7's instance level"
    assert junit_key("tests/a.py::f[bell\x07]") == ("tests.a", "f[bell#x07]"), "as pytest's bin_xml_escape writes it"


def test_a_bracket_in_the_file_path_matches_old_and_new_pytest():
    # pytest 9 ends the path at the first "::"; older releases cut at the first "[" anywhere (and
    # then put the whole address in the name).
    assert junit_keys("tests/test_[x].py::test_y[1]") == [("tests.test_[x]", "test_y[1]"), ("", "tests.test_[x].py::test_y[1]")]
    xml = ('<testsuites><testsuite><testcase classname="" name="tests.test_[x].py::test_y[1]"/>'
           "</testsuite></testsuites>")
    assert outcomes_for(["tests/test_[x].py::test_y[1]"], xml)[0] == {"tests/test_[x].py::test_y[1]": TestStatus.PASSED}


def test_selection_keeps_ids_pytest_before_7_can_select_and_widens_the_others():
    ids = ["t.py::f[a::b]", "t.py::f[c::d]", "t.py::f[plain]", "t.py::T::g[x::y]", "t.py::h"]
    assert selection_args(ids) == ["t.py::f", "t.py::f[plain]", "t.py::T::g", "t.py::h"]


def test_ids_beyond_one_command_line_are_selected_by_file():
    ids = [f"tests/test_{n % 3}.py::test_{n}[{'p' * 200}]" for n in range(20)]
    assert selection_args(ids, max_bytes=10_000) == ids
    assert selection_args(ids, max_bytes=1_000) == ["tests/test_0.py", "tests/test_1.py", "tests/test_2.py"]


def test_many_ids_are_selected_by_file():
    """Old pytest collects a module again per id it is given: hundreds of ids cost minutes."""
    ids = [f"tests/test_{n % 2}.py::test_{n}" for n in range(101)]
    assert selection_args(ids[:100]) == ids[:100]
    assert selection_args(ids) == ["tests/test_0.py", "tests/test_1.py"]


# --- in a container: derivation and grading on an old pytest -----------------------------------

ODD_TESTS = '''
import pytest

from oddlib import shout

SHAPES = ["a::b", "x/y.z", "a.b::C.d", "with space", "ünï", "[inner]", "a]b", "a[b", "it's \\"$q\\"", "back\\\\slash"]


@pytest.mark.parametrize("shape", SHAPES)
def test_shout(shape):
    assert shout(shape) == shape.upper()


@pytest.mark.parametrize("shape", SHAPES)
def test_untouched(shape):
    assert shape


@pytest.mark.parametrize("n", [1], ids=["long " + "z" * 300 + " :: id"])
def test_long(n):
    assert shout("a") == "A"


# 400 ids of ~340 characters: more than one command-line argument may hold (128 KiB).
@pytest.mark.parametrize("n", range(400), ids=[f"many {i:04} " + "m" * 320 for i in range(400)])
def test_many(n):
    assert n >= 0


class TestOuter:
    class TestInner:
        @pytest.mark.parametrize("v", ["p::q"])
        def test_nested(self, v):
            assert shout(v) == "P::Q"
'''


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "GIT_AUTHOR_DATE": "2021-05-03T10:00:00Z", "GIT_COMMITTER_DATE": "2021-05-03T10:00:00Z", "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


def _commit(repo: Path, files: dict[str, str | None]) -> str:
    """A commit writing ``files`` (deleting those given as None); its hash."""
    for name, text in files.items():
        if text is None:
            (repo / name).unlink()
            continue
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text, encoding="utf-8")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "change")
    return _git(repo, "rev-parse", "HEAD").strip()


ODDLIB_FIXED = "def shout(text):\n    return text.upper()\n"


def _built_oddlib(docker_client, tmp_path: Path, base_files: dict[str, str], test_files: dict[str, str | None], *,
                  pytest_install: str = "pytest==6.2.5", fixed: str = ODDLIB_FIXED, python: str = "3.9"):
    """A one-task repository (``oddlib.shout`` fixed by the PR, ``test_files`` its tests) built on
    ``python`` (3.9) with pytest 6.2.5 (which splits command-line ids on every '::') or ``pytest_install``.
    The tests import the package from the working directory, so pytest is all the environment
    installs. (task, runtime)"""
    from repo2env.jsonl import read_tasks, write_jsonl
    from repo2env.languages.python.spec.overrides import EnvOverride
    from repo2env.models import Task
    from repo2env.pipeline.stages import build_tasks_dir
    from repo2env.runtime.backends.docker import DockerBackend
    from repo2env.runtime.build import BuildOptions

    repo = tmp_path / "oddlib"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    base = _commit(repo, {
        "setup.py": "from setuptools import setup\nsetup(name='oddlib', version='1.0', packages=['oddlib'])\n",
        "oddlib/__init__.py": "def shout(text):\n    return text\n", **base_files,
    })
    fixed = _commit(repo, {"oddlib/__init__.py": fixed})
    tested = _commit(repo, test_files)
    task = Task(instance_id="acme__oddlib-1", repo="acme/oddlib", pull_number=1, base_commit=base,
                patch=_git(repo, "diff", base, fixed), test_patch=_git(repo, "diff", fixed, tested),
                problem_statement="shout should shout", created_at="2021-05-03T10:00:00Z")
    folder = tmp_path / "tasks"
    write_jsonl(folder / "tasks.jsonl", [task])
    (folder / "source.json").write_text(f'{{"repo": "acme/oddlib", "clone_path": "{repo}", "source": "test"}}')
    runtime = DockerBackend(docker_client)
    pytest_pin = EnvOverride(python=python, install=[f"python -m pip install -q {pytest_install}"], date_pin=False)
    summary = build_tasks_dir(folder, runtime=runtime, options=BuildOptions(jobs=1, overrides={"acme/oddlib": pytest_pin}))
    assert summary.ok == 1, summary.failures
    [task] = read_tasks(folder / "tasks.jsonl")
    with runtime.start(task) as sandbox:
        version = sandbox.exec("python -m pytest --version 2>&1").output
    wanted = pytest_install.split()[0].removeprefix("pytest==")
    assert re.search(rf"pytest (version )?{re.escape(wanted)}\b", version), f"these tests are about pytest {wanted}, the environment has {version}"
    return task, runtime


def _derive_and_grade(task, runtime, tmp_path: Path):
    """(derivation, gold grading, empty-patch grading) of a task."""
    from repo2env.validate.derive import derive_tests
    from repo2env.verify.grader import Grader

    derivation = derive_tests(task, runtime, runs=1, hash_seeds=(0,), timeout_s=120)
    assert derivation.error is None
    task = task.model_copy(update={"FAIL_TO_PASS": derivation.fail_to_pass, "PASS_TO_PASS": derivation.pass_to_pass})
    with Grader(runtime, tmp_path / "grades", timeout_s=120) as grader:
        return derivation, grader.grade(task, task.patch), grader.grade(task, "")


@pytest.mark.docker
def test_odd_ids_survive_derivation_and_grading_on_pytest_6(docker_client, tmp_path):
    """Every odd id lands in FAIL_TO_PASS or PASS_TO_PASS; the gold patch scores 1, the empty patch 0."""
    task, runtime = _built_oddlib(docker_client, tmp_path, {"tests/__init__.py": "", "tests/pkg/__init__.py": ""}, {
        "tests/pkg/test_odd.py": ODD_TESTS,
        "test_at_root.py": "import pytest\n\n@pytest.mark.parametrize('v', ['r::s', 'r s'])\n"
                           "def test_root(v):\n    assert v\n"})
    derivation, gold, empty = _derive_and_grade(task, runtime, tmp_path)
    module = "tests/pkg/test_odd.py::"
    shapes = ["a::b", "x/y.z", "a.b::C.d", "with space", "\\xfcn\\xef", "[inner]", "a]b", "a[b", 'it\'s "$q"',
              "back\\\\slash"]
    assert sorted(derivation.fail_to_pass) == sorted(
        [f"{module}test_shout[{shape}]" for shape in shapes]
        + [f"{module}test_long[long {'z' * 300} :: id]", f"{module}TestOuter::TestInner::test_nested[p::q]"])
    assert sorted(derivation.pass_to_pass) == sorted(
        [f"{module}test_untouched[{shape}]" for shape in shapes] + ["test_at_root.py::test_root[r::s]",
                                                                   "test_at_root.py::test_root[r s]"]
        + [f"{module}test_many[many {i:04} {'m' * 320}]" for i in range(400)])
    assert gold.error is None and gold.reward == 1.0 and set(gold.tests.values()) == {TestStatus.PASSED}
    assert empty.reward == 0.0 and empty.p2p_rate == 1.0 and empty.f2p_rate == 0.0


@pytest.mark.docker
def test_a_tests_folder_with_its_own_ini_file_keeps_runnable_ids(docker_client, tmp_path):
    """pytest's rootdir is the folder of the nearest ini file above the tests; with tests/pytest.ini
    the ids would be relative to tests/ and name no file from /testbed, where grading runs them. Its
    addopts also put a prefix before every JUnit classname."""
    ini = "[pytest]\naddopts = --junitprefix=acme\n"
    task, runtime = _built_oddlib(docker_client, tmp_path, {"tests/pytest.ini": ini}, {
        "tests/test_shout.py": "from oddlib import shout\n\ndef test_shout():\n    assert shout('a') == 'A'\n\n"
                               "def test_same():\n    assert shout('') == ''\n"})
    derivation, gold, empty = _derive_and_grade(task, runtime, tmp_path)
    assert (derivation.fail_to_pass, derivation.pass_to_pass) == (["tests/test_shout.py::test_shout"],
                                                                   ["tests/test_shout.py::test_same"])
    assert gold.reward == 1.0 and empty.reward == 0.0 and empty.p2p_rate == 1.0


@pytest.mark.docker
@pytest.mark.slow
def test_pytest_3_0_keeps_its_ids_from_the_junit_option(docker_client, tmp_path):
    """pytest 3.0's ``-o`` takes any number of values: ``-o junit_family=xunit2`` before the ids
    swallowed them ("-o/--override-ini expects option=value style", no report, gold scored 0 on
    click 2016-2017). The option goes as one word. And pytest < 3.5, named its configuration file
    with -c, takes the tests' folder as its rootdir (ids ``test_shout.py::...``, none of derivation's:
    marshmallow 2017, every test missing): it finds setup.cfg itself. Derivation and grading both run
    (Python 3.6, the Python of the time, where pytest 3.0 imports)."""
    task, runtime = _built_oddlib(docker_client, tmp_path, {"setup.cfg": "[tool:pytest]\naddopts = -rs\n"}, {
        "tests/test_shout.py": "from oddlib import shout\n\ndef test_shout():\n    assert shout('a') == 'A'\n\n"
                               "def test_same():\n    assert shout('') == ''\n"},
        pytest_install="pytest==3.0.7 py==1.4.34", python="3.6")
    assert task.env_spec.pytest_version == "3.0.7"
    derivation, gold, empty = _derive_and_grade(task, runtime, tmp_path)
    assert (derivation.fail_to_pass, derivation.pass_to_pass) == (["tests/test_shout.py::test_shout"],
                                                                   ["tests/test_shout.py::test_same"])
    assert gold.error is None and not gold.tampered and gold.reward == 1.0, (gold.error, gold.tests)
    assert empty.error is None and empty.reward == 0.0 and empty.p2p_rate == 1.0


@pytest.mark.docker
def test_pytest_3_instance_ids_deleted_test_files_and_late_usage_errors_grade_cleanly(docker_client, tmp_path):
    """pytest 3 spells a method's id ``f.py::Class::()::test`` (the live stream too, the canaries
    not); its usage error for ids whose module no longer collects leaves the session's status at 0
    and exits 4; and a test patch that deletes a test file must not make that file a target. None
    of it is tampering or a grading error: derivation finds the tests, gold scores 1, empty 0."""
    task, runtime = _built_oddlib(docker_client, tmp_path, {"tests/test_old.py": "def test_old():\n    pass\n"}, {
        "tests/test_old.py": None,
        "tests/test_shout.py": "from oddlib import shout\n\n\nclass TestShout:\n    def test_shout(self):\n"
                               "        assert shout('a') == 'A'\n\n    def test_same(self):\n        assert shout('') == ''\n",
        "tests/test_loud.py": "from oddlib import LOUD  # only the fix has it: before it, the module does not collect\n\n\n"
                              "class TestLoud:\n    def test_loud(self):\n        assert LOUD\n"},
        pytest_install="pytest==3.5.1 py==1.5.3 pluggy==0.6.0 attrs==17.4.0 more-itertools==4.1.0 six==1.11.0",
        fixed="LOUD = True\n\n\n" + ODDLIB_FIXED)
    assert "deleted file mode" in task.test_patch
    derivation, gold, empty = _derive_and_grade(task, runtime, tmp_path)
    assert sorted(derivation.fail_to_pass) == ["tests/test_loud.py::TestLoud::()::test_loud",
                                               "tests/test_shout.py::TestShout::()::test_shout"]
    assert derivation.pass_to_pass == ["tests/test_shout.py::TestShout::()::test_same"]
    assert gold.error is None and not gold.tampered and gold.reward == 1.0
    assert empty.error is None and not empty.tampered and empty.reward == 0.0 and empty.pytest_exit == 4


def test_every_layer_splits_ids_with_one_function(tmp_path):
    """One splitter, below every layer: the grader's module re-exports it, and validation's report,
    the agent's run_tests tool and the interface probe read an id with ``::`` in its parameters whole."""
    from repo2env.envs.tools import AgentTools
    from repo2env.languages import test_ids
    from repo2env.languages.python_interface import read_tests
    from repo2env.models import ExecResult, ValidationReport
    from repo2env.validate.acceptance import AcceptancePolicy
    from repo2env.validate.report import write_summary
    from repo2env.verify import junit

    assert junit.split_node_id is test_ids.split_node_id
    assert test_ids.short_name("tests/a.py::T::f[x::y]") == "f[x::y]"
    assert test_ids.short_name("tests/a.py::f") == "f" and test_ids.short_name("README.rst") == "README.rst"

    flaky = "tests/a.py::test_f[a::b]"
    summary = tmp_path / "summary.md"
    write_summary(summary, [ValidationReport(instance_id="o__r-1", repo="o/r", verdict="rejected",
                                             reasons=["f2p_flaky"], flaky_tests={flaky: 0.5})],
                  policy=AcceptancePolicy(), funnel_path=tmp_path / "none.json", total_tasks=1)
    assert "test_f[a::b] (0.50)" in summary.read_text()

    class RecordingSandbox:
        commands: list[str] = []

        def exec(self, command, **_):
            self.commands.append(command)
            return ExecResult(exit_code=0, output="ok")

    sandbox = RecordingSandbox()
    AgentTools(sandbox, test_command="python -m pytest").run_tests(f"{flaky} ../x.py::t[a::b]")
    assert sandbox.commands == [], "a target outside /testbed refuses the whole call"
    AgentTools(sandbox, test_command="python -m pytest").run_tests(f"'{flaky}' tests/b.py")
    assert sandbox.commands == ["python -m pytest '/testbed/tests/a.py::test_f[a::b]' /testbed/tests/b.py"]

    source = "import pytest\n\n@pytest.mark.parametrize('x', ['a::b'])\ndef test_f(x):\n    assert x == 'a::b'\n"
    assert set(read_tests({"tests/a.py": source}, [flaky, "tests/a.py::"])) == {flaky}
