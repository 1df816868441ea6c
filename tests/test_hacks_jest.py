"""A jest task graded for real (built from a repository made here, jest 29.7.0 from the npm registry
on the Node 18 base): the gold patch earns 1.0, the empty patch 0.0; a patch that rewrites jest's
report earns nothing and is caught by the live outcome stream jest's reporter (ours, beside the
``--json`` report) sends the root collector; forged stream lines gain nothing; the stream's
variables and descriptor are out of sight of the tests and of a child process they start.
"""

from __future__ import annotations

import json
from pathlib import Path

import padkit
import pytest
from javascript_projects import clone_patch
from stream_probes import FORGE_REPORT_AND_STREAM, SEES_THE_STREAM, common_js

pytestmark = [pytest.mark.docker, pytest.mark.slow]

PACKAGE = {"name": "padkit", "version": "1.0.0", "engines": {"node": ">=18 <20"},
           "scripts": {"test": "jest"}, "devDependencies": {"jest": "29.7.0"}}
LIBRARY, FIXED = padkit.library(esm=False)
F2P, P2P = padkit.F2P, padkit.P2P


def _imports(name: str) -> str:
    return f"const {{ {name} }} = require('../lib/pad.js');\n"


#: Rewrites jest's report once jest has written it (the grading's path from the command line of the
#: shell that started jest), from a process left behind: every test passed.
FORGE_THE_REPORT = r"""
const { spawn } = require("child_process");
const FORGER = `
const fs = require("fs");
const sleep = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
function commandLines() {
  return fs.readdirSync("/proc").filter((name) => /^\\d+$/.test(name)).map((pid) => {
    try { return fs.readFileSync("/proc/" + pid + "/cmdline", "utf8"); } catch (error) { return ""; }
  });
}
const report = commandLines().map((line) => line.match(/--outputFile=([^\\s\\0;&|']+)/)).find(Boolean)?.[1];
for (let round = 0; report && round < 3000; round++) {
  try {
    const written = JSON.parse(fs.readFileSync(report, "utf8"));
    if (!written.success) {
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
  sleep(5);
}
`;
spawn(process.execPath, ["-e", FORGER], { detached: true, stdio: "ignore" }).unref();
"""


@pytest.fixture(scope="module")
def jest_task(docker_client, tmp_path_factory):
    """The built task (its ground truth's FAIL_TO_PASS and PASS_TO_PASS) and the repository."""
    return padkit.built_task(docker_client, tmp_path_factory.mktemp("jest-task"), PACKAGE, _imports)


def _gains_nothing(result) -> None:
    assert result.reward == 0.0 and not result.resolved, (result.reward, result.error, result.tests)


def test_gold_earns_everything_and_nothing_earns_nothing(node_grader, jest_task):
    task, _ = jest_task
    gold = node_grader.grade(task, task.patch)
    assert gold.reward == 1.0 and gold.error is None and not gold.tampered, gold
    # jest's outcomes came through the stream: one entry per test file, and the end.
    stream = [json.loads(line) for line in (Path(gold.log_dir) / "stream.jsonl").read_text().splitlines()]
    assert [record["kind"] for record in stream] == ["entry", "entry", "end"], stream
    empty = node_grader.grade(task, "")
    assert empty.reward == 0.0 and empty.error is None and not empty.tampered, empty


@pytest.mark.alone  # a forger racing the grading's end: beside two other workers it can lose the race
def test_a_rewritten_report_is_caught_by_the_live_stream(node_grader, jest_task, tmp_path):
    task, repo = jest_task
    result = node_grader.grade(task, clone_patch(repo, task.base_commit, tmp_path, {"lib/pad.js": FORGE_THE_REPORT + LIBRARY}))
    _gains_nothing(result)
    assert result.tampered and "passed, the live outcomes say" in result.error, result.error


@pytest.mark.alone  # a forger racing the grading's end: beside two other workers it can lose the race
def test_forged_lines_on_every_fifo_gain_nothing(node_grader, jest_task, tmp_path):
    task, repo = jest_task
    code = common_js(FORGE_REPORT_AND_STREAM) + "forgeReportAndStream();\n" + LIBRARY
    result = node_grader.grade(task, clone_patch(repo, task.base_commit, tmp_path, {"lib/pad.js": code}))
    _gains_nothing(result)
    assert result.tampered and "the live outcomes say" in result.error, result.error
    # The forger's lines reached the collector (its end lines besides the reporter's one).
    assert (Path(result.log_dir) / "stream.jsonl").read_text().count('"kind":"end"') > 1


def test_the_stream_is_out_of_sight_of_the_tests_and_their_children(node_grader, jest_task, tmp_path):
    """The fix, effective only where the code under test sees the stream's variables (its own
    environment, a child's) or a child inherits descriptor 9: it earns nothing, and it did look."""
    task, repo = jest_task
    guard = common_js(SEES_THE_STREAM) + 'if (!seesTheStream()) throw new Error("no stream in sight");\n'
    result = node_grader.grade(task, clone_patch(repo, task.base_commit, tmp_path, {"lib/pad.js": guard + FIXED}))
    _gains_nothing(result)
    output = (Path(result.log_dir) / "test_output.txt").read_text()
    assert '"own":false' in output and '"own":true' not in output and '"child":true' not in output, output[-2000:]


#: Wraps jest's ``it`` and ``test`` from the code under test (the test files require it before they
#: declare a test): each test whose title the hidden tests were guessed to use gets a passing twin
#: of the same title, so the report names that id twice. ``REGISTER`` is how the wrapper declares
#: the real test and its twin: the twin after the real test, before it, or with the real one skipped.
TWINS = r"""
const guessed = ["pads to the width", "pads numbers too", "shouts a greeting"];
for (const name of ["it", "test"]) {
  const real = global[name];
  if (typeof real !== "function") continue;
  const twin = (title, fn, timeout) => {
    if (!guessed.includes(title)) return real(title, fn, timeout);
    REGISTER
  };
  global[name] = Object.assign(twin, real);
}
"""
REGISTER = {"after": "real(title, fn, timeout); real(title, () => {});",
            "before": "real(title, () => {}); real(title, fn, timeout);",
            "skipped": "real.skip(title, fn); real(title, () => {});"}


@pytest.mark.parametrize(("order", "status"), [("after", "failed"), ("before", "failed"), ("skipped", "skipped")])
def test_a_passing_twin_of_each_hidden_test_earns_nothing(node_grader, jest_task, tmp_path, order, status):
    """The twins ran (the stream names each title twice), and each id keeps the real test's outcome,
    in the report as in the stream: a plain failure (or skip), not a disagreement between them."""
    task, repo = jest_task
    code = TWINS.replace("REGISTER", REGISTER[order]) + LIBRARY
    result = node_grader.grade(task, clone_patch(repo, task.base_commit, tmp_path, {"lib/pad.js": code}))
    _gains_nothing(result)
    assert not result.tampered and all(result.tests[test] == status for test in task.FAIL_TO_PASS), result
    stream = (Path(result.log_dir) / "stream.jsonl").read_text()
    assert stream.count('"title":"pads to the width"') == 2, stream[-3000:]


def test_the_image_carries_jests_cache_of_the_base_commit_and_runs_hit_it(docker_client, jest_task):
    """The task image's warm-up filled jest's transform cache with the base commit's files (a test
    of it is there) and nothing of the hidden tests (the PR's new titles are in no cache file); the
    plan a grading runs finds every file it loads there: it adds no transform."""
    from repo2env.languages.javascript.runner import javascript_facts
    from repo2env.languages.javascript.runners import JEST_CACHE_DIR
    from repo2env.runtime.backends.docker import DockerBackend

    task, _ = jest_task
    transforms = f"find {JEST_CACHE_DIR} -path '*jest-transform-cache-*' -type f | sort"
    with DockerBackend(docker_client).start_image(task.env_spec.image) as sandbox:
        warm = sandbox.exec(transforms).output.split()
        assert any("/pad_" in path for path in warm) and any("/padtest_" in path for path in warm), warm
        assert sandbox.exec(f"grep -rl 'keeps case' {JEST_CACHE_DIR}").exit_code == 0, "the base's test file"
        hidden = sandbox.exec(f"grep -rl -e 'pads to the width' -e 'shouts a greeting' {JEST_CACHE_DIR}")
        assert hidden.exit_code == 1 and not hidden.output.strip(), hidden.output
        plan = javascript_facts(task.env_spec).plan(task.PASS_TO_PASS, "/tmp/reports")
        ran = sandbox.exec(["sh", "-c", plan.command], timeout=120)
        report = json.loads(sandbox.exec("cat /tmp/reports/jest-0.json").output)
        assert report["numPassedTests"] == len(task.PASS_TO_PASS), ran.output[-2000:]
        assert sandbox.exec(transforms).output.split() == warm, "every file the run loaded was in the cache"


def test_a_cache_folder_the_patch_points_jest_at_is_not_followed(node_grader, jest_task, tmp_path, docker_client):
    """A patch that names its own jest cache folder (package.json's ``jest`` field, where it could
    plant transforms) and a fix effective only where jest then writes its transforms there: graded,
    it earns nothing (our runs name their own folder and the base's ``jest`` field is restored);
    run by jest as the patch configures it, the same fix passes, so the probe did look."""
    import subprocess

    from repo2env.runtime.backends.docker import DockerBackend

    task, repo = jest_task
    planted = "/testbed/.planted-jest-cache"
    package = json.loads(subprocess.run(["git", "-C", str(repo), "show", f"{task.base_commit}:package.json"],
                                        check=True, capture_output=True, text=True).stdout)
    package["jest"] = {"cacheDirectory": planted}
    guard = f'if (!require("fs").existsSync("{planted}")) throw new Error("jest keeps its cache elsewhere");\n'
    patch = clone_patch(repo, task.base_commit, tmp_path, {"lib/pad.js": guard + FIXED,
                                                           "package.json": json.dumps(package, indent=2) + "\n"})
    result = node_grader.grade(task, patch)
    _gains_nothing(result)
    assert "jest keeps its cache elsewhere" in (Path(result.log_dir) / "test_output.txt").read_text()
    with DockerBackend(docker_client).start(task) as sandbox:
        sandbox.write_file("/tmp/agent.diff", patch)
        sandbox.write_file("/tmp/tests.diff", task.test_patch)
        ran = sandbox.exec("git apply /tmp/agent.diff && git apply /tmp/tests.diff && "
                           "./node_modules/.bin/jest --ci --verbose 2>&1; echo status=$?", timeout=120)
        assert ran.output.rstrip().endswith("status=0") and "pads to the width" in ran.output, ran.output[-2000:]
        assert sandbox.exec(f"test -d {planted}").exit_code == 0
