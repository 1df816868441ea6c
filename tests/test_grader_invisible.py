"""The grader is invisible to the code under test (issue 19.1), and configuration files below the
root are the snapshot's (issue 18.3), on a fixture repository built here whose tests live inside
the package, start ``python -m pytest`` in a subprocess, run pytester sessions (in process and in
a subprocess) and count their own module's tests.

Before: the outcome plugin's ``PYTEST_PLUGINS`` and ``PYTHONPATH`` reached every process the tests
started, which could not import it (its FIFO was gone) and failed: gold passed in derivation and
failed in grading. A package-level ``pyproject.toml`` the patch adds or changes was the nearest
configuration to the tests, so grade.sh named it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_hacks import HIDDEN_PLUGIN  # noqa: E402 - a plugin that turns every report into a pass
from test_test_ids import _commit, _git  # noqa: E402 - the fixture repositories' git helpers

pytestmark = pytest.mark.docker

SHOUT_TESTS = '''import os
import subprocess
import sys

from toolpkg import shout


def test_shout():
    assert shout("abc") == "ABC"


def test_shout_words():
    assert shout("hello world") == "HELLO WORLD"


def test_a_pytest_started_in_a_subprocess_runs_as_it_would(tmp_path):
    (tmp_path / "test_child.py").write_text("from toolpkg import shout\\n\\n\\ndef test_child():\\n    assert shout('a') == 'A'\\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_pytester_sessions_see_only_their_own_plugins(pytester):
    pytester.makepyfile("from toolpkg import shout\\n\\n\\ndef test_inside():\\n    assert shout('b') == 'B'\\n")
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)
    config = pytester.parseconfig()
    assert not [name for name, _ in config.pluginmanager.list_name_plugin() if "repo2env" in str(name)]


def test_nothing_of_a_grader_is_in_sight():
    assert not [name for name in os.environ if name.startswith("PYTEST_PLUGINS")]
    assert not [entry for entry in sys.path + os.environ.get("PYTHONPATH", "").split(":") if "repo2env" in entry]
    assert not [name for name in sys.modules if "repo2env" in name]


def test_the_module_holds_its_own_tests():
    names = sorted(name for name in dir(sys.modules[__name__]) if name.startswith("test_"))
    assert names == ["test_a_pytest_started_in_a_subprocess_runs_as_it_would", "test_nothing_of_a_grader_is_in_sight",
                     "test_pytester_sessions_see_only_their_own_plugins", "test_shout", "test_shout_words",
                     "test_the_module_holds_its_own_tests"]
'''
SHOUT_MODULE = "toolpkg/tests/test_shout.py"


@pytest.fixture(scope="module")
def toolpkg(docker_client, tmp_path_factory):
    """The fixture repository's one task, built (pytest 8 on Python 3.11, the package installed
    editable): (task, runtime)."""
    from repo2env.jsonl import read_tasks, write_jsonl
    from repo2env.languages.python.spec.overrides import EnvOverride
    from repo2env.models import Task
    from repo2env.pipeline.stages import build_tasks_dir
    from repo2env.runtime.backends.docker import DockerBackend
    from repo2env.runtime.build import BuildOptions

    root = tmp_path_factory.mktemp("toolpkg")
    repo = root / "toolpkg"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    base = _commit(repo, {
        "setup.py": "from setuptools import find_packages, setup\n\nsetup(name='toolpkg', version='1.0', "
                    "packages=find_packages())\n",
        "pytest.ini": "[pytest]\naddopts = -p pytester\n",
        "toolpkg/__init__.py": "def shout(text):\n    return text\n",
        "toolpkg/pyproject.toml": "[tool.black]\nline-length = 100\n",
        "toolpkg/tests/__init__.py": "",
        "toolpkg/tests/test_old.py": "from toolpkg import shout\n\n\ndef test_same():\n    assert shout('') == ''\n",
    })
    fixed = _commit(repo, {"toolpkg/__init__.py": "def shout(text):\n    return text.upper()\n"})
    tested = _commit(repo, {SHOUT_MODULE: SHOUT_TESTS})
    task = Task(instance_id="acme__toolpkg-1", repo="acme/toolpkg", pull_number=1, base_commit=base,
                patch=_git(repo, "diff", base, fixed), test_patch=_git(repo, "diff", fixed, tested),
                problem_statement="shout should shout", created_at="2021-05-03T10:00:00Z")
    folder = root / "tasks"
    write_jsonl(folder / "tasks.jsonl", [task])
    (folder / "source.json").write_text(f'{{"repo": "acme/toolpkg", "clone_path": "{repo}", "source": "test"}}')
    runtime = DockerBackend(docker_client)
    install = EnvOverride(python="3.11", install=["python -m pip install -q pytest==8.3.5 setuptools",
                                                  "python -m pip install -q --no-build-isolation --no-deps -e ."],
                          date_pin=False)
    summary = build_tasks_dir(folder, runtime=runtime, options=BuildOptions(jobs=1, overrides={"acme/toolpkg": install}))
    assert summary.ok == 1, summary.failures
    [task] = read_tasks(folder / "tasks.jsonl")
    return task, runtime


@pytest.fixture(scope="module")
def validated_toolpkg(toolpkg, tmp_path_factory):
    """The task validated (quick policy): (task, its report)."""
    from conftest import quick_policy

    from repo2env.validate.run import validate_task

    task, runtime = toolpkg
    validated, _ = validate_task(task, runtime, quick_policy(), logs_dir=tmp_path_factory.mktemp("toolpkg-logs"))
    return validated, validated.validation


def test_gold_grades_as_it_derives_and_the_counting_module_goes_canary_free(validated_toolpkg, toolpkg, tmp_path):
    from repo2env.models import RolloutResult
    from repo2env.validate.run import gold_differences
    from repo2env.verify.grader import Grader

    task, report = validated_toolpkg
    module = SHOUT_MODULE + "::"
    assert sorted(task.FAIL_TO_PASS) == sorted(module + name for name in (
        "test_shout", "test_shout_words", "test_a_pytest_started_in_a_subprocess_runs_as_it_would",
        "test_pytester_sessions_see_only_their_own_plugins"))
    assert sorted(task.PASS_TO_PASS) == [module + "test_nothing_of_a_grader_is_in_sight",
                                         module + "test_the_module_holds_its_own_tests"]
    assert report.verdict == "accepted", (report.reasons, report.error, report.gold_differences)
    assert report.canary_free_modules == [SHOUT_MODULE], "its tests count their siblings: no canaries there"
    assert [rollout.reward for rollout in report.rollouts if rollout.kind == "gold"] == [1.0]
    # The variants, graded beside gold before the module went canary-free, are graded again as every
    # later grading is: no canary in that module.
    plans = [Path(rollout.grade.log_dir) / "canaries.json" for rollout in report.rollouts
             if rollout.kind != "gold" and rollout.grade and rollout.grade.log_dir]
    placed = [json.loads(plan.read_text()) for plan in plans if plan.is_file()]
    assert placed, "the variants' gradings record their canaries"
    assert not [test for found in placed for test in found["must_fail"] + found["must_pass"] if test.startswith(module)]
    # With canaries in that module, gold fails exactly the test that counts, and the rejection would
    # name it with its failure's first line; everything the grader adds stays out of the tests' sight.
    _, runtime = toolpkg
    with_canaries = task.model_copy(update={"validation": report.model_copy(update={"canary_free_modules": []})})
    with Grader(runtime, tmp_path / "grades", timeout_s=300) as grader:
        graded = grader.grade(with_canaries, task.patch)
    failing = {test for test, status in graded.tests.items() if status != "passed"}
    assert failing == {module + "test_the_module_holds_its_own_tests"}, (graded.error, graded.failures)
    assert graded.failures[module + "test_the_module_holds_its_own_tests"].startswith("failure: AssertionError")
    named = gold_differences(task, [RolloutResult(kind="gold", reward=graded.reward, grade=graded)])
    assert list(named) == [module + "test_the_module_holds_its_own_tests"]


# Configuration files below the root (issue 18.3): the package's own pyproject.toml is the nearest
# configuration to tests that live inside the package.
BELOW_THE_ROOT = {
    "package-pyproject-gains-a-pytest-table": (
        "printf '\\n[tool.pytest.ini_options]\\naddopts = \"-p toolpkg.plugin\"\\n' >> toolpkg/pyproject.toml",),
    "package-pyproject-replaced-by-a-link": (
        "printf '[tool.pytest.ini_options]\\naddopts = \"-p toolpkg.plugin\"\\n' > toolpkg/settings.toml",
        "rm toolpkg/pyproject.toml && ln -s settings.toml toolpkg/pyproject.toml"),
    "new-pyprojects-at-the-root-and-in-a-sibling-folder": (
        "mkdir -p toolpkg/sub && printf '[tool.pytest.ini_options]\\naddopts = \"-p toolpkg.plugin\"\\n' > toolpkg/sub/pyproject.toml",
        "printf '[tool.pytest.ini_options]\\naddopts = \"-p toolpkg.plugin\"\\n' > pyproject.toml"),
    "dotted-key-in-the-package-pyproject": (
        "printf '\\n[tool]\\npytest.ini_options.addopts = \"-p toolpkg.plugin\"\\n' >> toolpkg/pyproject.toml",),
    "new-ini-files-in-the-package": (
        "printf '[pytest]\\naddopts = -p toolpkg.plugin\\n' > toolpkg/pytest.ini",
        "printf '[pytest]\\naddopts = -p toolpkg.plugin\\n' > toolpkg/tox.ini",
        "printf '[tool:pytest]\\naddopts = -p toolpkg.plugin\\n' > toolpkg/setup.cfg"),
}


@pytest.mark.parametrize("route", sorted(BELOW_THE_ROOT))
def test_configuration_below_the_root_is_the_snapshots(validated_toolpkg, toolpkg, docker_client, tmp_path, route):
    from test_hacks import agent_patch, assert_gains_nothing

    from repo2env.verify.grader import Grader

    task, _ = validated_toolpkg
    _, runtime = toolpkg
    patch = agent_patch(docker_client, task, files={"toolpkg/plugin.py": HIDDEN_PLUGIN}, commands=BELOW_THE_ROOT[route])
    with Grader(runtime, tmp_path / "grades", timeout_s=300) as grader:
        empty = grader.grade(task, "")
        result = grader.grade(task, patch)
    assert_gains_nothing(result, empty)
    assert result.tests == empty.tests or "reaches into the test runner" in (result.error or ""), result.error
