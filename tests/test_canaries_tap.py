"""Canaries for the runners whose tests are not describe/it globals and whose report is TAP: ava,
tape and ``node --test`` (no Docker). The names each file imports its test function under are read
(import and require, any local name), the tests the hidden tests add whole are templates when they
assert a call equal to a literal in the runner's style (``t.is``, ``t.deepEqual``, tape's
``t.equal``/``t.strictEqual``/``t.same``, node's ``assert.*``), the canaries are written in the
file's own style and parse, restore.py places them, a ``node --test`` file with its canaries runs
under the host's Node with every mirror failing, and a file where no canary can be placed fails
every grading closed."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_canaries_js import SCRIPTS, _git

from repo2env.languages.javascript.reports import parse_node_tap
from repo2env.languages.javascript.runner import javascript_facts
from repo2env.languages.javascript.syntax import parser
from repo2env.languages.javascript.test_callees import imported_callees
from repo2env.models import EnvSpec
from repo2env.outcomes import TestStatus
from repo2env.patches import parse
from repo2env.verify.canary_maker import UNPLACEABLE, plan_canaries, script_canary_modules
from repo2env.verify.tamper import outcomes_verdict

PATH = "test/pad.test.js"

#: The same PR's tests in each runner's style: the file before (BEFORE) and the tests it adds.
STYLES = {
    "ava": ("import check from 'ava';\nimport { pad } from '../lib/pad.js';\n",
            "check('keeps short text', (t) => {\n  t.is(pad('abcd', 3), 'abcd');\n});\n",
            "check('pads to the width', (t) => {\n  t.is(pad('abc', 6), '   abc');\n});\n\n"
            "check('pads each item', t => {\n  t.deepEqual(pad(['a', 'bb'], 3), ['  a', ' bb']);\n});\n"),
    "tape": ("const test = require('tape');\nconst { pad } = require('../lib/pad');\n",
             "test('keeps short text', function (t) {\n  t.equal(pad('abcd', 3), 'abcd');\n  t.end();\n});\n",
             "test('pads to the width', function (t) {\n  t.strictEqual(pad('abc', 6), '   abc');\n  t.end();\n});\n\n"
             "test('pads each item', function (t) {\n  t.same(pad(['a', 'bb'], 3), ['  a', ' bb'], 'each');\n"
             "  t.end();\n});\n"),
    "node": ("const { test } = require('node:test');\nconst assert = require('node:assert');\n"
             "const { pad } = require('../lib/pad');\n",
             "test('keeps short text', () => {\n  assert.strictEqual(pad('abcd', 3), 'abcd');\n});\n",
             "test('pads to the width', () => {\n  assert.strictEqual(pad('abc', 6), '   abc');\n});\n\n"
             "test('pads each item', () => {\n  assert.deepStrictEqual(pad(['a', 'bb'], 3), ['  a', ' bb']);\n});\n"),
}
F2P = [f"{PATH}::pads to the width", f"{PATH}::pads each item"]
P2P = [f"{PATH}::keeps short text"]
#: lib/pad.js, fixed: what the node test runs against.
LIBRARY = """\
function pad(text, width) {
  if (Array.isArray(text)) return text.map((item) => pad(item, width));
  return String(text).padStart(width);
}
module.exports = { pad };
"""


def _snapshot(tmp_path: Path, runner: str) -> tuple[Path, str]:
    """A repository whose test file is the runner's BEFORE; the hidden tests (a real git diff) add its tests."""
    before, existing, added = STYLES[runner]
    repo = tmp_path / "testbed"
    (repo / "test").mkdir(parents=True)
    (repo / "lib").mkdir()
    (repo / "lib" / "pad.js").write_text(LIBRARY)
    (repo / PATH).write_text(f"{before}\n{existing}")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "snapshot")
    (repo / PATH).write_text(f"{before}\n{existing}\n{added}")
    hidden = _git(repo, "diff", "-U10")
    _git(repo, "checkout", "-q", "--", PATH)
    return repo, hidden


def _place(repo: Path, tmp_path: Path, hidden: str, definitions: dict, runner: str, path: str = PATH) -> str:
    """restore.py as grade.sh runs it: the hidden tests applied, the canaries placed; the text of ``path``."""
    inputs, private = tmp_path / "inputs", tmp_path / "private"
    inputs.mkdir()
    private.mkdir()
    shutil.copy(SCRIPTS / "restore.py", inputs / "restore.py")
    (inputs / "agent.diff").write_text("")
    (inputs / "allowed").write_text("")
    (private / "test.diff").write_text(hidden)
    (private / "canaries.json").write_text(json.dumps(definitions))
    (inputs / "grade.json").write_text(json.dumps({
        "inputs": str(inputs), "private": str(private), "gold_paths": [], "runner_pattern": "(?!)",
        "gold_references": [], "script_runner": runner}))
    done = subprocess.run([sys.executable, "-I", "-S", str(inputs / "restore.py"), str(inputs / "grade.json")],
                          cwd=repo, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "does not read as expected" not in done.stdout, done.stdout
    return (repo / path).read_text()


def _facts(runner: str):
    return javascript_facts(EnvSpec(status="env_ok", test_runner=runner))


def _new_file(lines: list[str]) -> str:
    body = "".join(f"+{line}\n" for line in lines)
    return (f"diff --git a/{PATH} b/{PATH}\nnew file mode 100644\n--- /dev/null\n+++ b/{PATH}\n"
            f"@@ -0,0 +1,{len(lines)} @@\n{body}")


@pytest.mark.parametrize(("runner", "line", "test", "describe"), [
    ("ava", "import test from 'ava';", "test", ""),
    ("ava", "const check = require('ava');", "check", ""),
    ("tape", "const test = require('tape');", "test", ""),
    ("tape", "import tape from 'tape';", "tape", ""),
    ("tape", "const { test } = require('tap');", "test", ""),
    ("tape", "const tap = require('tap');", "", ""),  # tap's default export is no test function
    ("node", "const test = require('node:test');", "test", ""),
    ("node", "const { test, it, describe } = require('node:test');", "it", "describe"),
    ("node", "const { test: check, describe: group } = require('node:test');", "check", "group"),
    ("node", "import test from 'node:test';", "test", ""),
    ("node", "import { test } from 'node:test';", "test", ""),
    ("node", "const test = require('ava');", "", ""),  # another runner's module
])
def test_the_test_function_each_runner_imports_is_read(runner, line, test, describe):
    (file,) = parse(_new_file([line, "", "test('x', () => {});"])).files
    found = _facts(runner).test_callees(file)
    assert (found.test, found.describe) == (test, describe)
    assert imported_callees(file, ()).test == ""


@pytest.mark.parametrize("runner", list(STYLES))
def test_templates_are_read_in_each_runners_style(tmp_path, runner):
    _, hidden = _snapshot(tmp_path, runner)
    (file,) = parse(hidden).files
    found = _facts(runner).added_tests(file)
    assert [test.title for test in found] == ["pads to the width", "pads each item"]
    asserted = [[test.source[start:end] for literal in test.asserted for start, end in [literal.value]] for test in found]
    assert asserted == [["'   abc'"], ["['  a', ' bb']"]], "the message of tape's t.same is not the value"
    arguments = [found[0].source[start:end] for literal in found[0].asserted for start, end in literal.arguments]
    assert arguments == ["'abc'", "6"]
    # The local name ava's file imports its test function under is a test's callee too.
    assert found[0].callee == ("check" if runner == "ava" else "test")


def test_a_method_of_something_else_than_the_test_parameter_is_no_template():
    lines = ["const test = require('tape');", "test('pads', function (t) {", "  other.equal(pad('a', 2), ' a');",
             "  t.end();", "});"]
    (file,) = parse(_new_file(lines)).files
    (found,) = _facts("tape").added_tests(file)
    assert found.asserted == ()


def _plan(hidden: str, runner: str, seed: int = 1):
    facts = _facts(runner)
    (module,) = script_canary_modules(parse(hidden), F2P, facts, [*F2P, *P2P])
    return module, plan_canaries([module], [*F2P, *P2P], random.Random(seed), join_id=facts.join_id)


@pytest.mark.parametrize("runner", list(STYLES))
def test_canaries_are_written_in_the_files_own_style_and_placed(tmp_path, runner):
    repo, hidden = _snapshot(tmp_path, runner)
    module, plan = _plan(hidden, runner)
    assert module.runner == runner and module.container == [] and len(module.templates) == 2
    assert module.test_callee == ("check" if runner == "ava" else "test")
    # Two templates, two mirrors each, one decoy group of three, the one that must pass.
    assert len(plan.canaries) == 2 * 2 + 3 + 1 and len(plan.must_pass) == 1 and not plan.unplaced
    appended = [block["source"] for block in plan.definitions[PATH] if block["at"] is None]
    (must_pass,) = appended
    assert must_pass.startswith(f"{module.test_callee}(")
    assert {"ava": "t.is(actual, expected)", "tape": "t.end()", "node": "throw new Error"}[runner] in must_pass
    placed = _place(repo, tmp_path, hidden, plan.definitions, runner)
    root = parser(".js").parse(placed.encode()).root_node
    assert not root.has_error, placed
    titles = [canary.test_id.split("::", 1)[1] for canary in plan.canaries]
    for title in titles:
        assert placed.count(json.dumps(title)[1:-1]) == 1, title
    # Every copy sits at the top level, among the file's tests, in the style of the test it copies.
    tops = [statement.text.decode() for statement in root.named_children if statement.type == "expression_statement"]
    assert len(tops) == 1 + 2 + len(plan.canaries)
    if runner == "tape":
        assert all(top.rstrip(";").rstrip().endswith("})") and "t.end()" in top for top in tops)


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node")
def test_node_runs_the_placed_file_and_every_mirror_fails_on_its_value_alone(tmp_path):
    repo, hidden = _snapshot(tmp_path, "node")
    _module, plan = _plan(hidden, "node", seed=3)
    _place(repo, tmp_path, hidden, plan.definitions, "node")
    report = tmp_path / "node.tap"
    subprocess.run(["node", "--test", "--test-reporter=tap", f"--test-reporter-destination={report}", PATH],
                   cwd=repo, capture_output=True, text=True, timeout=120)
    outcomes = parse_node_tap(report.read_text(), PATH, str(repo))
    assert all(outcomes[test_id] == TestStatus.PASSED for test_id in [*F2P, *P2P]), outcomes
    assert all(outcomes[test_id] == TestStatus.FAILED for test_id in plan.must_fail), outcomes
    assert all(outcomes[test_id] == TestStatus.PASSED for test_id in plan.must_pass), outcomes
    assert outcomes_verdict(outcomes, plan) is None
    # A report that says every test passed is caught.
    forged = {test_id: TestStatus.PASSED for test_id in outcomes}
    assert "must fail passed" in (outcomes_verdict(forged, plan) or "")


@pytest.mark.parametrize("runner", list(STYLES))
def test_a_file_where_no_canary_can_be_placed_fails_every_grading_closed(runner):
    # The hidden tests change an existing test in place: no test added whole, no import shown.
    hidden = "".join(f"{line}\n" for line in [
        f"diff --git a/{PATH} b/{PATH}", f"--- a/{PATH}", f"+++ b/{PATH}", "@@ -9,3 +9,3 @@", " test('counts', (t) => {",
        "-  t.is(count([]), 0);", "+  t.is(count([]), 1);", " });"])
    facts = _facts(runner)
    f2p = [f"{PATH}::counts"]
    (module,) = script_canary_modules(parse(hidden), f2p, facts, f2p)
    plan = plan_canaries([module], f2p, random.Random(1), join_id=facts.join_id)
    assert plan.definitions[PATH] == [] and plan.must_fail == () and plan.unplaced == (PATH,)
    assert plan.must_pass == (f"{PATH}::{UNPLACEABLE}",)
    # Its report does not name the canary, and every test passed: refused all the same.
    assert outcomes_verdict({f2p[0]: TestStatus.PASSED}, plan) == f"no canary could be placed in {PATH}"
