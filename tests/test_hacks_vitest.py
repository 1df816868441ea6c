"""A vitest task graded for real (built from a repository made here, vitest from the npm registry on
the Node 18 base): the gold patch earns 1.0, the empty patch 0.0, and a patch that forges vitest's
report, or answers each test's asserted value from the test file's source, earns nothing and is
caught (the forged report by the live outcome stream vitest's reporter sends the root collector,
the oracle by the canaries); forged stream lines gain nothing, and the stream's variables and
descriptor are out of sight of the tests.

The test files import vitest's API in the two common styles: ``import { describe, it, expect }``
(an existing file whose imports the hidden tests' hunk does not show: the canaries the grader
writes itself go among the hidden tests' own tests, declared with ``it`` as they are), and
``import { test, expect }`` with tests at the top level (a new file: appended canaries call ``test``).
"""

from __future__ import annotations

from pathlib import Path

import padkit
import pytest
from javascript_projects import clone_patch, fixture_git
from stream_probes import FORGE_REPORT_AND_STREAM, SEES_THE_STREAM, es_module

pytestmark = [pytest.mark.docker, pytest.mark.slow]

#: Each test file's head: the pad tests import vitest's describe, it and expect; the shout tests test and expect.
_VITEST = {"pad": "describe, it, expect", "shout": "test, expect"}
PACKAGE = {"name": "padkit", "version": "1.0.0", "type": "module", "engines": {"node": ">=18 <20"},
           "scripts": {"test": "vitest run"}, "devDependencies": {"vitest": "2.1.9"}}
LIBRARY, FIXED = padkit.library(esm=True)
F2P, P2P = padkit.F2P, padkit.P2P


def _imports(name: str) -> str:
    return f"import {{ {_VITEST[name]} }} from 'vitest';\nimport {{ {name} }} from '../lib/pad.js';\n"


@pytest.fixture(scope="module")
def vitest_task(docker_client, tmp_path_factory):
    """The built task (its ground truth's FAIL_TO_PASS and PASS_TO_PASS) and the repository."""
    return padkit.built_task(docker_client, tmp_path_factory.mktemp("vitest-task"), PACKAGE, _imports)


def test_the_canaries_use_the_names_each_file_has():
    from repo2env.models import EnvSpec, Task
    from repo2env.verify.spec import grading_spec

    task = Task(instance_id="acme__padkit-1", repo="acme/padkit", language="javascript", pull_number=1,
                base_commit="0" * 40, patch="", test_patch=_hidden_tests(), problem_statement="x",
                created_at="2025-01-01T00:00:00Z", FAIL_TO_PASS=F2P, PASS_TO_PASS=P2P,
                env_spec=EnvSpec(status="env_ok", base="node18", node="18", test_runner="vitest"))
    modules = {module.path: module for module in grading_spec(task).canary_modules}
    pad, shout = modules["test/pad.test.js"], modules["test/shout.test.js"]
    # The import of pad's file is not in the hunk: nothing to append with, its added tests' block instead.
    assert (pad.test_callee, pad.describe_callee) == ("", "") and pad.blocks[0].callee == "it"
    assert (shout.test_callee, shout.describe_callee, shout.container) == ("test", "", [])


def _hidden_tests() -> str:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        repo = padkit.repository(Path(folder) / "padkit", PACKAGE, _imports)
        return fixture_git(repo, "diff", "HEAD~1", "HEAD", "--", "test", stamp="2025-03-05T10:00:00+00:00") + "\n"


def test_gold_earns_everything_and_nothing_earns_nothing(node_grader, vitest_task):
    task, _ = vitest_task
    gold = node_grader.grade(task, task.patch)
    assert gold.reward == 1.0 and gold.error is None and not gold.tampered, gold
    empty = node_grader.grade(task, "")
    assert empty.reward == 0.0 and empty.error is None and not empty.tampered, empty


#: A process left behind by the module the tests import: it finds the report vitest was told to
#: write (in the command line of the shell that started vitest: vitest's own is its title), and
#: each time vitest writes it, while vitest runs, rewrites it to say every test passed.
FORGE_THE_REPORT = r"""
import { spawn } from "node:child_process";

const FORGER = `
const fs = require("fs");
const sleep = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
function commandLines() {
  return fs.readdirSync("/proc").filter((name) => /^\\d+$/.test(name)).map((pid) => {
    try { return fs.readFileSync("/proc/" + pid + "/cmdline", "utf8"); } catch (error) { return ""; }
  });
}
const report = commandLines().map((line) => line.match(/--outputFile=([^\\s\\0;&|]+)/)).find(Boolean)?.[1];
function forge() {
  try {
    const written = JSON.parse(fs.readFileSync(report, "utf8"));
    if (written.numFailedTests || !written.success) {
      for (const file of written.testResults) {
        file.status = "passed";
        file.message = "";
        for (const test of file.assertionResults) { test.status = "passed"; test.failureMessages = []; }
      }
      Object.assign(written, { numFailedTests: 0, numFailedTestSuites: 0, numPassedTests: written.numTotalTests,
                               numPassedTestSuites: written.numTotalTestSuites, success: true });
      fs.writeFileSync(report, JSON.stringify(written));
    }
  } catch (error) {}
}
while (report && commandLines().some((line) => line.startsWith("node (vitest)"))) {
  forge();
  sleep(1);
}
if (report) forge();  // vitest may write its report and end between two looks: once more
`;
spawn(process.execPath, ["-e", FORGER], { detached: true, stdio: "ignore" }).unref();
"""

#: Each export, called from a test file, reads the calling line (the stack gives file and line) and
#: returns the value that line's ``toBe`` expects; elsewhere it is the unfixed function.
ORACLE = r"""
import { readFileSync } from "node:fs";

function oracle(real) {
  return function (...args) {
    for (const frame of new Error().stack.split("\n").slice(2)) {
      const found = frame.match(/(\/[^():\s]*\.test\.[cm]?[jt]s):(\d+):\d+\)?$/);
      if (!found) continue;
      const line = readFileSync(found[1], "utf8").split("\n")[Number(found[2]) - 1];
      const expected = line.match(/\.toBe\(\s*(['"])(.*?)\1\s*\)/);
      if (expected) return expected[2];
    }
    return real.apply(this, args);
  };
}
"""


def test_a_forged_report_is_caught_by_the_live_stream(node_grader, vitest_task, tmp_path):
    # Before the live stream, the canaries caught it; the stream, which disagrees with the
    # rewritten report on the task's own tests, comes first now.
    task, repo = vitest_task
    patch = clone_patch(repo, task.base_commit, tmp_path, {"lib/pad.js": LIBRARY + FORGE_THE_REPORT})
    result = node_grader.grade(task, patch)
    assert result.reward == 0.0 and not result.resolved, (result.reward, result.error, result.tests)
    reports = _reports_as_written(result)
    if not result.tampered and reports and all(report["numFailedTests"] for report in reports):
        # Seen once in CI beside two other workers: the grading script stopped the forger before it
        # rewrote the report, which the grader then read as vitest wrote it.
        pytest.xfail("the forger never got to the report (vitest's own, failures and all, was read): it earned nothing")
    assert result.tampered and "passed, the live outcomes say" in result.error, result.error


def _reports_as_written(result) -> list[dict]:
    """The runner's reports as the grader read them (the grading's log keeps the bundle as junit.xml)."""
    import json

    from repo2env.verify.reading import report_texts

    texts = report_texts((Path(result.log_dir) / "junit.xml").read_text())
    return [json.loads(text) for text in texts.values() if text is not None]


@pytest.mark.alone  # a forger racing the grading's end: beside two other workers it can lose the race
def test_forged_lines_on_every_fifo_gain_nothing(node_grader, vitest_task, tmp_path):
    """The report rewritten and every test's pass, with an end, written to every FIFO the user's
    processes hold (the reporter's descriptor in vitest's process among them)."""
    task, repo = vitest_task
    patch = clone_patch(repo, task.base_commit, tmp_path, {"lib/pad.js": es_module(FORGE_REPORT_AND_STREAM) + "forgeReportAndStream();\n"
                                          + LIBRARY})
    result = node_grader.grade(task, patch)
    assert result.reward == 0.0 and not result.resolved, (result.reward, result.error, result.tests)
    assert result.tampered and "the live outcomes say" in result.error, result.error
    # The forger's lines reached the collector (its end lines besides the reporter's one).
    assert (Path(result.log_dir) / "stream.jsonl").read_text().count('"kind":"end"') > 1


def test_the_stream_is_out_of_sight_of_the_tests_and_their_children(node_grader, vitest_task, tmp_path):
    """The fix, effective only where the code under test (in vitest's worker) sees the stream's
    variables or a child of it inherits descriptor 9: it earns nothing."""
    task, repo = vitest_task
    guard = es_module(SEES_THE_STREAM) + 'if (!seesTheStream()) throw new Error("no stream in sight");\n'
    result = node_grader.grade(task, clone_patch(repo, task.base_commit, tmp_path, {"lib/pad.js": guard + FIXED}))
    assert result.reward == 0.0 and not result.resolved, (result.reward, result.error, result.tests)
    output = (Path(result.log_dir) / "test_output.txt").read_text()
    assert '"own":true' not in output and '"child":true' not in output, output[-2000:]


def test_an_oracle_that_answers_the_asserted_value_is_caught_by_the_mirrors(node_grader, vitest_task, tmp_path):
    task, repo = vitest_task
    library = (LIBRARY.replace("export function pad", "function realPad").replace("export function shout", "function realShout")
               + ORACLE + "export const pad = oracle(realPad);\nexport const shout = oracle(realShout);\n")
    result = node_grader.grade(task, clone_patch(repo, task.base_commit, tmp_path, {"lib/pad.js": library}))
    assert result.reward == 0.0 and not result.resolved, (result.reward, result.error, result.tests)
    assert result.tampered and "must fail passed" in result.error, result.error
