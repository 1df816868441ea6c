"""Attempts to beat the JavaScript grader (mocha, on the fmtkit demo's validated tasks): each must earn
no more than the empty patch.

The channels: the report file the tests' own process writes (rewritten at exit: the live outcome
stream the reporter sends the root collector disagrees; or its reporter's events turned around from
the code under test: the canaries), the stream itself (forged lines on its descriptor; its variables
and descriptor looked for, in the tests' process and a child of theirs), the run itself (an early ``process.exit(0)``, a hang),
the runner's configuration (``.mocharc``, package.json's ``mocha`` field and test script) and what
Node loads by itself (``node_modules``, ``.npmrc``). The patches are made with git in a clone of the
demo at the task's base commit, as an agent's diff would be. Measured: each earns 0.0, as the empty
patch does, and the gold patch 1.0.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from stream_probes import FORGE_REPORT_AND_STREAM, PROBE_MARKER, SEES_THE_STREAM, common_js

from repo2env.verify.grader import Grader

pytestmark = [pytest.mark.docker, pytest.mark.slow]

#: Rewrites every report beside the mocha reporter's own once the run has written it: all passed.
FORGE_AT_EXIT = """
process.on("exit", () => {
  const fs = require("fs");
  const path = require("path");
  const out = process.env.REPO2ENV_MOCHA_REPORT;
  if (!out) return;
  for (const name of fs.readdirSync(path.dirname(out))) {
    const file = path.join(path.dirname(out), name);
    try {
      const report = JSON.parse(fs.readFileSync(file, "utf8"));
      for (const test of report.tests) test.state = "passed";
      report.hooks = [];
      fs.writeFileSync(file, JSON.stringify(report));
    } catch (error) {}
  }
});
"""
#: Turns every failure the runner emits into a pass, before any reporter hears of it.
TURN_FAILURES_AROUND = """
try {
  const Runner = require("mocha/lib/runner");
  const emit = Runner.prototype.emit;
  Runner.prototype.emit = function (name, ...rest) {
    return name === "fail" ? emit.call(this, "pass", rest[0]) : emit.call(this, name, ...rest);
  };
} catch (error) {}
"""


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def diff_at_base(repo: Path, task, tmp_path: Path, *, prepend: dict[str, str] | None = None,
                 append: dict[str, str] | None = None, files: dict[str, str] | None = None,
                 forced: tuple[str, ...] = (), gold: bool = False) -> str:
    """The diff of a clone at the task's base (with its gold patch applied first when ``gold``)
    with ``prepend`` code put after each file's first line, ``append`` code at each file's end and
    ``files`` written (``forced``: added even where .gitignore says not)."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    _git(clone, "checkout", "-q", task.base_commit)
    if gold:
        subprocess.run(["git", "apply", "-"], cwd=clone, input=task.patch, text=True, check=True)
    for path, code in (prepend or {}).items():
        head, _, rest = (clone / path).read_text().partition("\n")
        (clone / path).write_text(f"{head}\n{code}\n{rest}")
    for path, code in (append or {}).items():
        (clone / path).write_text((clone / path).read_text() + "\n" + code + "\n")
    for path, text in (files or {}).items():
        (clone / path).parent.mkdir(parents=True, exist_ok=True)
        (clone / path).write_text(text)
    _git(clone, "add", "-A")
    if forced:
        _git(clone, "add", "-f", *forced)
    return _git(clone, "diff", "--cached", "--binary", task.base_commit)


@pytest.fixture(scope="module")
def probed(built_js_demo):
    """A built fmtkit task (#10: one test file, its gold patch in lib/) with its ground truth's
    FAIL_TO_PASS and PASS_TO_PASS (which validation derives: tests/test_demo_js.py)."""
    from repo2env.demo import JS_DEMO_PULLS

    _, tasks = built_js_demo
    (pull,) = [pull for pull in JS_DEMO_PULLS if pull.number == 10]
    return tasks[10].model_copy(update={"FAIL_TO_PASS": list(pull.fail_to_pass),
                                        "PASS_TO_PASS": list(pull.pass_to_pass)})


@pytest.fixture(scope="module")
def grader(docker_client, tmp_path_factory):
    from repo2env.runtime.backends.docker import DockerBackend

    return Grader(DockerBackend(docker_client), tmp_path_factory.mktemp("js-hack-grades"), timeout_s=120)


@pytest.fixture(scope="module")
def empty(grader, probed):
    result = grader.grade(probed, "")
    assert result.reward == 0.0 and result.error is None, result
    return result


def _source(task) -> str:
    paths = [line.split(" b/", 1)[1] for line in task.patch.splitlines() if line.startswith("diff --git ")]
    return next(path for path in paths if path.startswith("lib/"))


def assert_gains_nothing(result, empty) -> None:
    assert result.reward <= empty.reward == 0.0, (result.reward, result.error, result.tests)
    assert not result.resolved


def test_gold_earns_everything(grader, probed, empty):
    gold = grader.grade(probed, probed.patch)
    assert gold.reward == 1.0 and gold.error is None and not gold.tampered, gold


def test_forged_outcomes_are_caught_by_the_canaries(grader, probed, empty, js_demo_repo, tmp_path):
    # The reporter's events turned around: the report and the live stream agree, the canaries do not.
    patch = diff_at_base(js_demo_repo.path, probed, tmp_path, prepend={_source(probed): TURN_FAILURES_AROUND})
    result = grader.grade(probed, patch)
    assert_gains_nothing(result, empty)
    assert result.tampered and "canary" in result.error, result.error


@pytest.mark.alone  # a forger racing the grading's end: beside two other workers it can lose the race
def test_a_report_rewritten_at_exit_is_caught_by_the_live_stream(grader, probed, empty, js_demo_repo, tmp_path):
    patch = diff_at_base(js_demo_repo.path, probed, tmp_path, prepend={_source(probed): FORGE_AT_EXIT})
    result = grader.grade(probed, patch)
    assert_gains_nothing(result, empty)
    assert result.tampered and "passed, the live outcomes say failed" in result.error, result.error


@pytest.mark.alone  # its timing does not hold beside two other workers (seen in a parallel run)
def test_forged_lines_on_every_fifo_gain_nothing(docker_client, probed, empty, js_demo_repo, tmp_path):
    """The report rewritten, and the same entries (every test passed) with an end line written to
    every FIFO the user's processes hold, the collector's descriptor among them: the reporter's own
    entries of the failures are in the stream too, and a failure is not undone by a pass."""
    from repo2env.runtime.backends.docker import DockerBackend

    patch = diff_at_base(js_demo_repo.path, probed, tmp_path,
                         prepend={_source(probed): common_js(FORGE_REPORT_AND_STREAM) + "forgeReportAndStream();"})
    # A run takes about 2 s; a 30 s timeout keeps the rare cut-short run below from costing 2 minutes.
    with Grader(DockerBackend(docker_client), tmp_path / "grades", timeout_s=30) as short:
        result = short.grade(probed, patch)
    assert_gains_nothing(result, empty)
    if not result.tampered and "timed out" in (result.error or ""):
        # Seen about once in 12 runs here, on the code before 2026-12-07's stop too: the forger, which
        # holds the plan's shell stopped until it is done, never let go, and the run was cut short.
        pytest.xfail("the forger held the plan's shell until the timeout: cut short, it earned nothing")
    assert result.tampered and "the live outcomes say failed" in result.error, result.error
    # The forger's lines reached the collector (its end lines besides the reporter's one).
    assert (Path(result.log_dir) / "stream.jsonl").read_text().count('"kind":"end"') > 1


def test_the_stream_is_out_of_sight_of_the_tests_and_their_children(grader, probed, empty, js_demo_repo, tmp_path):
    """The gold patch, effective only where the code under test sees the stream's variables (in its
    own environment, or a child process's) or a child inherited descriptor 9: it earns nothing, and
    it did look."""
    guard = common_js(SEES_THE_STREAM) + 'if (!seesTheStream()) throw new Error("no stream in sight");'
    patch = diff_at_base(js_demo_repo.path, probed, tmp_path, prepend={_source(probed): guard}, gold=True)
    result = grader.grade(probed, patch)
    assert_gains_nothing(result, empty)
    output = (Path(result.log_dir) / "test_output.txt").read_text()
    assert f'{PROBE_MARKER} {{"own":false,"child":false}}' in output and '"own":true' not in output, output[-2000:]


def test_exiting_early_with_status_zero_earns_nothing(grader, probed, empty, js_demo_repo, tmp_path):
    patch = diff_at_base(js_demo_repo.path, probed, tmp_path, prepend={_source(probed): "process.exit(0);"})
    assert_gains_nothing(grader.grade(probed, patch), empty)


def test_a_hang_is_cut_short_and_earns_nothing(docker_client, probed, empty, js_demo_repo, tmp_path):
    from repo2env.runtime.backends.docker import DockerBackend

    patch = diff_at_base(js_demo_repo.path, probed, tmp_path, prepend={_source(probed): "while (true) {}"})
    with Grader(DockerBackend(docker_client), tmp_path / "grades", timeout_s=20) as short:
        result = short.grade(probed, patch)
    assert_gains_nothing(result, empty)
    assert "timed out" in (result.error or ""), result.error


#: Once the tests have run (honestly), kills the plan's shells above the runner with SIGKILL: the
#: files after this one never run, and the run does not end on its own.
KILL_THE_PLAN = """
process.on("exit", () => {
  const fs = require("fs");
  let pid = process.ppid;
  while (pid > 1) {
    let stat;
    try { stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8"); } catch (error) { break; }
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const name = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
    if (name !== "sh") break;
    try { process.kill(pid, "SIGKILL"); } catch (error) {}
    pid = Number(fields[1]);
  }
});
"""


def test_a_run_cut_short_earns_nothing_even_with_the_fix(grader, probed, empty, js_demo_repo, tmp_path):
    # The gold patch, whose tests all pass, plus a kill of the plan's shell at the runner's exit: the
    # reports it left are honest, but the run did not end on its own (main's rule for pytest too).
    patch = diff_at_base(js_demo_repo.path, probed, tmp_path, prepend={_source(probed): KILL_THE_PLAN}, gold=True)
    result = grader.grade(probed, patch)
    assert_gains_nothing(result, empty)
    assert "cut short" in (result.error or ""), result.error


def test_a_mocharc_is_refused(grader, probed, empty, js_demo_repo, tmp_path):
    mocharc = {"require": ["tsx/cjs", "./lib/shim.js"], "extension": ["js", "mjs", "ts"]}
    patch = diff_at_base(js_demo_repo.path, probed, tmp_path, files={
        ".mocharc.json": json.dumps(mocharc), ".mocharc.yml": "require: ./lib/shim.js\n",
        "lib/shim.js": FORGE_AT_EXIT + TURN_FAILURES_AROUND})
    result = grader.grade(probed, patch)
    assert_gains_nothing(result, empty)
    assert {".mocharc.json", ".mocharc.yml"} <= set(result.filtered_paths)


def test_package_json_runner_fields_come_back(grader, probed, empty, js_demo_repo, tmp_path):
    package = json.loads(subprocess.run(["git", "show", f"{probed.base_commit}:package.json"], cwd=js_demo_repo.path,
                                        capture_output=True, text=True, check=True).stdout)
    package["scripts"]["test"] = "true"
    package["mocha"] = {"require": ["./lib/shim.js"]}
    patch = diff_at_base(js_demo_repo.path, probed, tmp_path, files={
        "package.json": json.dumps(package, indent=2), "lib/shim.js": FORGE_AT_EXIT + TURN_FAILURES_AROUND})
    assert_gains_nothing(grader.grade(probed, patch), empty)


def test_node_modules_and_npmrc_are_refused(grader, probed, empty, js_demo_repo, tmp_path):
    shim = "module.exports = require('../../lib/shim.js');\n"
    patch = diff_at_base(js_demo_repo.path, probed, tmp_path, files={
        "node_modules/tsx/cjs/index.cjs": shim, ".npmrc": "node-options=--require ./lib/shim.js\n",
        "lib/shim.js": FORGE_AT_EXIT + TURN_FAILURES_AROUND}, forced=("node_modules/tsx/cjs/index.cjs",))
    result = grader.grade(probed, patch)
    assert_gains_nothing(result, empty)
    assert {"node_modules/tsx/cjs/index.cjs", ".npmrc"} <= set(result.filtered_paths)


#: An oracle appended to the module the fix changes: each function it exports, called from a test
#: file, reads the calling line (the stack gives file and line) and returns the literal that line
#: compares its result with (`assert.equal(f(x), "lit")`); elsewhere it is the unfixed function.
#: With ``FIRST_ONLY`` (a forger that has read the canary maker: mirrors are whole copies of the
#: real test placed among its siblings) it answers only on the first line of the file that makes
#: that very call, betting that the first copy is the task's own test.
ORACLE = r"""
const ORACLE_FIRST_ONLY = %s;
function oracle(real) {
  return function (...args) {
    const fs = require("fs");
    for (const frame of new Error().stack.split("\n").slice(2)) {
      const found = frame.match(/\(?(\/[^():]*\.test\.[cm]?[jt]s):(\d+):\d+\)?$/);
      if (!found) continue;
      const lines = fs.readFileSync(found[1], "utf8").split("\n");
      const line = lines[Number(found[2]) - 1];
      const LITERAL = /,\s*("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?)\s*\);?\s*$/;
      const literal = line.match(LITERAL);
      if (!literal) break;
      const call = line.slice(0, literal.index);
      const first = lines.findIndex((other) => other.match(LITERAL) && other.slice(0, other.match(LITERAL).index) === call);
      if (ORACLE_FIRST_ONLY && first !== Number(found[2]) - 1) break;
      return JSON.parse(literal[1]);
    }
    return real.apply(this, args);
  };
}
for (const name of Object.keys(module.exports)) {
  if (typeof module.exports[name] === "function") module.exports[name] = oracle(module.exports[name]);
}
"""


def _demo_task(tasks, number):
    from repo2env.demo import JS_DEMO_PULLS

    (pull,) = [pull for pull in JS_DEMO_PULLS if pull.number == number]
    return tasks[number].model_copy(update={"FAIL_TO_PASS": list(pull.fail_to_pass), "PASS_TO_PASS": list(pull.pass_to_pass)})


def test_an_oracle_that_answers_the_asserted_value_is_caught_by_the_mirrors(grader, probed, empty, js_demo_repo,
                                                                           tmp_path):
    # The older canaries (self-contained comparisons) call nothing of the project: this oracle passed
    # every task test and none of them. The mirrors make the same calls against other values.
    patch = diff_at_base(js_demo_repo.path, probed, tmp_path, append={_source(probed): ORACLE % "false"})
    result = grader.grade(probed, patch)
    assert_gains_nothing(result, empty)
    assert result.tampered and "must fail passed" in result.error, result.error


def test_an_oracle_betting_on_file_order_is_caught_on_some_task(grader, built_js_demo, js_demo_repo, tmp_path):
    # Per templated test it forges, the bet holds with probability 1/3 (the real test is first of
    # it and its two mirrors, placed at random among the block's tests): over five tasks with two
    # or more templates each, surviving every grading has probability under 1/3**10.
    _, tasks = built_js_demo
    results = {}
    for number in (2, 4, 6, 8, 10):
        task = _demo_task(tasks, number)
        patch = diff_at_base(js_demo_repo.path, task, tmp_path / str(number),
                             append={_source(task): ORACLE % "true"})
        results[number] = grader.grade(task, patch)
    caught = [number for number, result in results.items() if result.tampered]
    assert caught, {number: (result.reward, result.error) for number, result in results.items()}
    assert all(results[number].reward == 0.0 for number in caught)
