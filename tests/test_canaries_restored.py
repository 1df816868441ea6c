"""Canaries in a test file the PR only modifies, below imports its hunks do not show (no Docker):
chalk's ``import test from 'ava'`` above a changed test. The build reads the names each hidden
test file declares tests with from the whole file as a grading restores it (the snapshot's text
with the test patch applied, :func:`~repo2env.languages.javascript.build.restored_test_files`),
so ava, tape, ``node --test`` and vitest files get their canaries, the one that must pass placed,
where the hunks alone placed none and failed every grading closed. A file whose whole text imports
no test function still fails closed; the runners whose ``describe``/``it`` are globals (mocha,
jest, jasmine) never needed the imports."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from test_canaries_tap import _place
from test_javascript_own_code import GitShell

from repo2env.languages.javascript.build import JavaScriptBuild
from repo2env.languages.javascript.reports import parse_node_tap
from repo2env.languages.javascript.syntax import parser
from repo2env.models import EnvSpec, FileCallees, Task
from repo2env.outcomes import TestStatus
from repo2env.verify.canary_maker import UNPLACEABLE
from repo2env.verify.spec import grading_spec
from repo2env.verify.tamper import outcomes_verdict

PATH = "test/count.test.js"
LIBRARY = "function count(items) {\n  return items.length;\n}\nmodule.exports = { count };\n"

#: Per runner: the file's head (its test API imported above every test), how a top-level test is
#: written, and how it asserts ``CALL`` equals ``VALUE``.
STYLES = {
    "ava": ("import test from 'ava';\nimport { count } from '../lib/count.js';\n",
            "test({title}, (t) => {{\n  t.is({call}, {value});\n}});\n"),
    "tape": ("const test = require('tape');\nconst { count } = require('../lib/count');\n",
             "test({title}, function (t) {{\n  t.equal({call}, {value});\n  t.end();\n}});\n"),
    "node": ("const { test } = require('node:test');\nconst assert = require('node:assert');\n"
             "const { count } = require('../lib/count');\n",
             "test({title}, () => {{\n  assert.strictEqual({call}, {value});\n}});\n"),
    "vitest": ("import { describe, it, expect } from 'vitest';\nimport { count } from '../lib/count';\n",
               "it({title}, () => {{\n  expect({call}).toBe({value});\n}});\n"),
}
#: The names the whole file gives each runner's canaries (test, describe).
NAMES = {"ava": ("test", ""), "tape": ("test", ""), "node": ("test", ""), "vitest": ("it", "describe")}
F2P = [f"{PATH}::counts the last one"]
P2P = [f"{PATH}::counts {number}" for number in range(6)]


def _file(runner: str, *, fixed: bool, head: str | None = None) -> str:
    """The test file: its head, six tests the PR leaves alone, then the one it changes in place."""
    before, style = STYLES[runner]
    tests = [style.format(title=json.dumps(f"counts {number}"), call=f"count({list(range(number))})", value=number)
             for number in range(6)]
    tests.append(style.format(title=json.dumps("counts the last one"), call="count([7, 8, 9])",
                              value=3 if fixed else 2))
    return (before if head is None else head) + "\n" + "\n".join(tests)


def _snapshot(tmp_path: Path, runner: str, *, head: str | None = None) -> tuple[Path, str]:
    """A snapshot repository whose test file the hidden tests (a real git diff, 3 lines of context)
    change in place, far below its head."""
    repo = tmp_path / "testbed"
    (repo / "test").mkdir(parents=True)
    (repo / "lib").mkdir()
    (repo / "lib" / "count.js").write_text(LIBRARY)
    (repo / PATH).write_text(_file(runner, fixed=False, head=head))
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "snapshot")
    (repo / PATH).write_text(_file(runner, fixed=True, head=head))
    hidden = _git(repo, "diff")
    _git(repo, "checkout", "-q", "--", PATH)
    return repo, hidden


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def _task(runner: str, hidden: str, test_callees: dict | None = None) -> Task:
    spec = EnvSpec(status="env_ok", base="node18", node="18", test_runner=runner, test_callees=test_callees or {})
    return Task(instance_id=f"acme__{runner}count-1", repo=f"acme/{runner}count", language="javascript", pull_number=1,
                base_commit="0" * 40, patch="", test_patch=hidden, problem_statement="x",
                created_at="2025-01-01T00:00:00Z", FAIL_TO_PASS=F2P, PASS_TO_PASS=P2P, env_spec=spec)


def _built(repo: Path, task: Task) -> Task:
    """``task`` with what the build records of its image (here: the snapshot's repository)."""
    facts = JavaScriptBuild().image_facts(GitShell(repo), task.env_spec, task)
    return task.model_copy(update={"env_spec": task.env_spec.model_copy(update=facts)})


needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="needs Node (the build reads the snapshot with it)")


@needs_node
@pytest.mark.parametrize("runner", list(STYLES))
def test_the_build_reads_the_names_from_the_whole_file_as_a_grading_restores_it(tmp_path, runner):
    repo, hidden = _snapshot(tmp_path, runner)
    assert not any(word in hidden for word in ("import", "require", "from")), "the hunk must not show the file's head"
    # The work tree is not what a grading restores (restore.py reverts a test file to HEAD): a
    # renamed import there changes nothing.
    (repo / PATH).write_text(_file(runner, fixed=False).replace("test", "check").replace(" it", " check"))
    facts = JavaScriptBuild().image_facts(GitShell(repo), EnvSpec(test_runner=runner), _task(runner, hidden))
    test, describe = NAMES[runner]
    assert facts == {"test_callees": {PATH: FileCallees(test=test, describe=describe)}}


@needs_node
@pytest.mark.parametrize("runner", list(STYLES))
def test_a_file_the_pr_only_modifies_gets_its_canaries_placed(tmp_path, runner):
    repo, hidden = _snapshot(tmp_path, runner)
    before = grading_spec(_task(runner, hidden))
    (old,) = before.canary_modules
    assert old.test_callee == "" and before.plan_canaries().unplaced == (PATH,), "the hunks alone fail closed"

    spec = grading_spec(_built(repo, _task(runner, hidden)))
    (module,) = spec.canary_modules
    assert (module.test_callee, module.describe_callee) == NAMES[runner]
    plan = spec.plan_canaries(random.Random(4))
    # No test is added whole (no template): two self-contained canaries that must fail, one that must pass.
    assert not plan.unplaced and len(plan.must_pass) == 1 and len(plan.must_fail) == 2
    assert UNPLACEABLE not in plan.must_pass[0]
    blocks = plan.definitions[PATH]
    assert len(blocks) == 3 and all(block["at"] is None for block in blocks)
    # Declared as the file's own tests are, in its own name for them.
    assert all(block["source"].startswith(f"{NAMES[runner][0]}(") for block in blocks)
    placed = _place(repo, tmp_path, hidden, plan.definitions, runner, PATH)
    assert not parser(".js").parse(placed.encode()).root_node.has_error, placed
    for canary in plan.canaries:
        assert placed.count(json.dumps(canary.test_id.split("::", 1)[1])) == 1, canary.test_id


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node")
def test_node_runs_the_canaries_of_a_modified_file_and_a_forged_report_is_caught(tmp_path):
    repo, hidden = _snapshot(tmp_path, "node")
    spec = grading_spec(_built(repo, _task("node", hidden)))
    plan = spec.plan_canaries(random.Random(5))
    _place(repo, tmp_path, hidden, plan.definitions, "node", PATH)
    report = tmp_path / "node.tap"
    subprocess.run(["node", "--test", "--test-reporter=tap", f"--test-reporter-destination={report}", PATH],
                   cwd=repo, capture_output=True, text=True, timeout=120)
    outcomes = parse_node_tap(report.read_text(), PATH, str(repo))
    assert all(outcomes[test_id] == TestStatus.PASSED for test_id in [*F2P, *P2P]), outcomes
    assert all(outcomes[test_id] == TestStatus.PASSED for test_id in plan.must_pass), outcomes
    assert all(outcomes[test_id] == TestStatus.FAILED for test_id in plan.must_fail), outcomes
    assert outcomes_verdict(outcomes, plan) is None
    forged = {test_id: TestStatus.PASSED for test_id in outcomes}
    assert "must fail passed" in (outcomes_verdict(forged, plan) or "")
    lost = {**outcomes, plan.must_pass[0]: TestStatus.FAILED}
    assert outcomes_verdict(lost, plan) is not None


@needs_node
@pytest.mark.parametrize(("runner", "head"), [
    # The test function comes from a helper of the project's: no name of the runner's modules.
    ("ava", "const test = require('./helpers/ava');\nconst { count } = require('../lib/count');\n"),
    # tap's default export is no test function.
    ("tape", "const tap = require('tap');\nconst test = tap.test;\nconst { count } = require('../lib/count');\n"),
])
def test_a_whole_file_that_imports_no_test_function_still_fails_closed(tmp_path, runner, head):
    repo, hidden = _snapshot(tmp_path, runner, head=head)
    task = _built(repo, _task(runner, hidden))
    assert task.env_spec.test_callees == {PATH: FileCallees()}
    plan = grading_spec(task).plan_canaries(random.Random(1))
    assert plan.unplaced == (PATH,) and plan.must_pass == (f"{PATH}::{UNPLACEABLE}",)
    assert outcomes_verdict({test_id: TestStatus.PASSED for test_id in [*F2P, *P2P]}, plan) \
        == f"no canary could be placed in {PATH}"


@needs_node
def test_a_snapshot_the_test_patch_does_not_apply_to_records_nothing(tmp_path):
    repo, hidden = _snapshot(tmp_path, "ava")
    (repo / PATH).write_text("import test from 'ava';\n")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "another snapshot")
    task = _built(repo, _task("ava", hidden))
    # Nothing is read where the grading's restore would refuse the hidden tests: the hunks decide.
    assert task.env_spec.test_callees == {}
    assert grading_spec(task).plan_canaries().unplaced == (PATH,)


#: The same change in the runners whose describe and it are globals, inside a describe block.
GLOBAL_STYLES = {
    "mocha": "const assert = require('assert');\nconst { count } = require('../lib/count');\n",
    "jest": "const { count } = require('../lib/count');\n",
    "jasmine": "const { count } = require('../lib/count');\n",
}


@pytest.mark.parametrize("runner", list(GLOBAL_STYLES))
def test_runners_with_global_test_functions_need_no_imports(tmp_path, runner):
    style = ("  it({title}, function () {{\n    expect({call}).toBe({value});\n  }});\n" if runner != "mocha" else
             "  it({title}, function () {{\n    assert.strictEqual({call}, {value});\n  }});\n")

    def file(value: int) -> str:
        tests = [style.format(title=json.dumps(f"counts {number}"), call=f"count({list(range(number))})", value=number)
                 for number in range(6)]
        tests.append(style.format(title=json.dumps("counts the last one"), call="count([7, 8, 9])", value=value))
        return GLOBAL_STYLES[runner] + "\ndescribe('count', function () {\n" + "\n".join(tests) + "});\n"

    repo = tmp_path / "testbed"
    (repo / "test").mkdir(parents=True)
    (repo / PATH).write_text(file(2))
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "snapshot")
    (repo / PATH).write_text(file(3))
    hidden = _git(repo, "diff")
    _git(repo, "checkout", "-q", "--", PATH)
    assert not any("describe" in line for line in hidden.splitlines() if not line.startswith("@@"))
    f2p, p2p = [f"{PATH}::count > counts the last one"], [f"{PATH}::count > counts {number}" for number in range(6)]
    task = _task(runner, hidden).model_copy(update={"FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p})
    # Nothing to read for them at build time, and nothing needed.
    assert JavaScriptBuild().image_facts(GitShell(repo), task.env_spec, task) == {}
    (module,) = grading_spec(task).canary_modules
    assert (module.test_callee, module.describe_callee, module.container) == ("it", "describe", ["count"])
    plan = grading_spec(task).plan_canaries(random.Random(2))
    assert not plan.unplaced and len(plan.must_pass) == 1
    placed = _place(repo, tmp_path, hidden, plan.definitions, runner, PATH)
    assert not parser(".js").parse(placed.encode()).root_node.has_error, placed
    assert all(placed.count(json.dumps(canary.test_id.split(" > ", 1)[1])) == 1 for canary in plan.canaries)
