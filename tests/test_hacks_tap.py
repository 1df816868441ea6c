"""Tasks of the runners whose report is TAP, graded for real (built from repositories made here on
the Node 18 base): tape 5.9.0 and ava 6.2.0 from the npm registry, and Node's own ``node --test``.
For each, the gold patch earns 1.0 and the empty patch 0.0; a patch whose code under test forges
the TAP report (a process it leaves behind swaps the report the runner writes for one where every
test of the file is ``ok``; for tape, whose report is the test process's stdout, one that turns
every ``not ok`` it writes into ``ok``) or answers each test's asserted value from the test file's source
earns nothing and is caught (``tampered``): by the live outcome stream for tape and ``node --test``,
whose outcomes go to the grading's root collector as well (``tape_stream.js``,
``node_reporter.mjs``), by the canaries for ava and for the oracle. For the streaming two, a
report rewritten once the runner is gone (every ``not ok`` made ``ok``), with or without the
stream's entries of that report forged on every FIFO, earns nothing either, and the stream's
variables are out of sight of a test file and of its child processes. A validation run on the
``node --test`` task accepts it.

Each project has two test files: an existing one whose imports the hidden tests' hunk does not show
(the canaries the grader writes itself go among the hidden tests' own tests, declared as they
are), and a new one whose ``require`` of the runner the hunk shows (its canaries are appended).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import mine_and_build_one, quick_policy
from javascript_projects import clone_patch, fixture_git, write_files
from stream_probes import FORGE_TAP_REPORT_AND_STREAM, PROBE_MARKER, SEES_THE_STREAM, common_js

from repo2env.languages.javascript.runners import STREAM_RUNNERS

pytestmark = [pytest.mark.docker, pytest.mark.slow]

LIBRARY = """\
function pad(text, width) {
  return String(text);
}

function shout(text) {
  return text.toUpperCase();
}

module.exports = { pad, shout };
"""
FIXED = LIBRARY.replace("return String(text);", "return String(text).padStart(width);").replace(
    "return text.toUpperCase();", "return text.toUpperCase() + '!';")

#: Per runner: its package.json's test script and dependencies, the head of a test file, and how
#: a test asserting ``CALL`` equals ``VALUE`` is written in its style.
RUNNERS = {
    "tape": ("tape test/*.test.js", {"tape": "5.9.0"}, "const test = require('tape');\n",
             "test({title!r}, function (t) {{\n  t.equal({call}, {value!r});\n  t.end();\n}});\n"),
    "ava": ("ava", {"ava": "6.2.0"}, "const test = require('ava');\n",
            "test({title!r}, (t) => {{\n  t.is({call}, {value!r});\n}});\n"),
    "node": ("node --test test/", {}, "const test = require('node:test');\nconst assert = require('node:assert');\n",
             "test({title!r}, () => {{\n  assert.strictEqual({call}, {value!r});\n}});\n"),
}
F2P = ["test/pad.test.js::pads to the width", "test/pad.test.js::pads numbers too",
       "test/shout.test.js::shouts a greeting"]
P2P = ["test/pad.test.js::returns strings", *(f"test/pad.test.js::keeps case {number}" for number in range(4))]


def _test(runner: str, title: str, call: str, value: str) -> str:
    return RUNNERS[runner][3].format(title=title, call=call, value=value)


def _files(runner: str, *, fixed: bool) -> dict[str, str]:
    script, dependencies, head, _ = RUNNERS[runner]
    package = {"name": f"{runner}pad", "version": "1.0.0", "engines": {"node": ">=18 <20"},
               "scripts": {"test": script}, "devDependencies": dependencies}
    # Enough tests before the PR's that the hidden tests' hunk does not show the require.
    existing = "\n".join([*(_test(runner, f"keeps case {number}", f"pad('Ab{number}', 1)", f"Ab{number}")
                            for number in range(4)), _test(runner, "returns strings", "typeof pad(1, 3)", "string")])
    pad_tests = f"{head}const {{ pad }} = require('../lib/pad');\n\n{existing}"
    files = {"package.json": json.dumps(package, indent=2) + "\n", ".gitignore": "node_modules/\n",
             "lib/pad.js": LIBRARY, "test/pad.test.js": pad_tests}
    if fixed:
        added = "\n".join([_test(runner, "pads to the width", "pad('abc', 6)", "   abc"),
                           _test(runner, "pads numbers too", "pad(4096, 7)", "   4096")])
        files.update({"lib/pad.js": FIXED, "test/pad.test.js": f"{pad_tests}\n{added}",
                      "test/shout.test.js": f"{head}const {{ shout }} = require('../lib/pad');\n\n"
                                            + _test(runner, "shouts a greeting", "shout('hello world')", "HELLO WORLD!")})
    return files


def _git(path: Path, *args: str, stamp: str = "2025-03-03T10:00:00+00:00") -> str:
    return fixture_git(path, *args, stamp=stamp)


def _repository(path: Path, runner: str, files=None, message: str = "Pad to the width, shout louder (#1)") -> Path:
    """The runner's padkit: one squashed PR (``message``) that fixes lib/pad.js and changes its
    tests; ``files(runner, fixed=...)`` gives the files on each side (default: the PR adds them)."""
    files = files or _files
    path.mkdir()
    _git(path, "init", "-q", "-b", "main")
    write_files(path, files(runner, fixed=False))
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "Initial commit")
    write_files(path, files(runner, fixed=True))
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", f"{message}\n\nPadding was ignored.", stamp="2025-03-04T10:00:00+00:00")
    return path


@pytest.fixture(scope="module")
def node_base(docker_client):
    from repo2env.runtime.backends.docker import DockerBackend
    from repo2env.runtime.node_bootstrap import ensure_node_base_image

    ensure_node_base_image(DockerBackend(docker_client), "18")


_BUILT: dict[str, tuple] = {}


@pytest.fixture(params=list(RUNNERS))
def tap_task(request, docker_client, node_base, tmp_path_factory):
    """The built task of the runner (its ground truth's FAIL_TO_PASS and PASS_TO_PASS) and its
    repository, built once per runner."""
    runner = request.param
    if runner not in _BUILT:
        folder = tmp_path_factory.mktemp(f"{runner}-task")
        repo = _repository(folder / f"{runner}pad", runner)
        task = mine_and_build_one(docker_client, repo, f"acme/{runner}pad", folder / "tasks")
        assert task.env_spec.test_runner == runner
        _BUILT[runner] = (task, repo)
    task, repo = _BUILT[runner]
    return task.model_copy(update={"FAIL_TO_PASS": F2P, "PASS_TO_PASS": P2P}), repo


@pytest.mark.parametrize("runner", list(RUNNERS))
def test_the_canaries_use_the_names_each_file_has(runner):
    import tempfile

    from repo2env.models import EnvSpec, Task
    from repo2env.verify.spec import grading_spec

    with tempfile.TemporaryDirectory() as folder:
        repo = _repository(Path(folder) / "padkit", runner)
        hidden = _git(repo, "diff", "HEAD~1", "HEAD", "--", "test") + "\n"
    task = Task(instance_id=f"acme__{runner}pad-1", repo=f"acme/{runner}pad", language="javascript", pull_number=1,
                base_commit="0" * 40, patch="", test_patch=hidden, problem_statement="x",
                created_at="2025-01-01T00:00:00Z", FAIL_TO_PASS=F2P, PASS_TO_PASS=P2P,
                env_spec=EnvSpec(status="env_ok", base="node18", node="18", test_runner=runner))
    modules = {module.path: module for module in grading_spec(task).canary_modules}
    pad, shout = modules["test/pad.test.js"], modules["test/shout.test.js"]
    # The require of pad's file is not in the hunk: its added tests' place instead, declared with `test`.
    assert pad.test_callee == "" and pad.blocks[0].callee == "test" and len(pad.templates) == 2
    assert (shout.test_callee, shout.container, shout.runner) == ("test", [], runner) and len(shout.templates) == 1


def test_gold_earns_everything_and_nothing_earns_nothing(node_grader, tap_task):
    task, _ = tap_task
    gold = node_grader.grade(task, task.patch)
    assert gold.reward == 1.0 and gold.error is None and not gold.tampered, gold
    empty = node_grader.grade(task, "")
    assert empty.reward == 0.0 and empty.error is None and not empty.tampered, empty


#: A process the module under test leaves behind: it finds the TAP report the runner writes (an
#: open file of a process whose command line names the test file), puts in its place a report in
#: which every test the file declares is ok (tape's with its "# title" comments), and leaves the
#: runner writing to the unlinked file.
FORGER = r"""
const fs = require("fs");
const path = require("path");
const sleep = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

function findReport() {
  for (const pid of fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    let fds = [];
    try { fds = fs.readdirSync("/proc/" + pid + "/fd"); } catch (error) { continue; }
    for (const fd of fds) {
      let target = "";
      try { target = fs.readlinkSync("/proc/" + pid + "/fd/" + fd); } catch (error) { continue; }
      if (!/\/(ava|tape|node)-\d+\.tap$/.test(target)) continue;
      try {
        const args = fs.readFileSync("/proc/" + pid + "/cmdline", "utf8").split("\0");
        const file = args.filter((arg) => /\.test\.js$/.test(arg)).pop();
        if (file) return { target, file: path.resolve(fs.readlinkSync("/proc/" + pid + "/cwd"), file) };
      } catch (error) {}
    }
  }
  return null;
}

let found = null;
for (let tries = 0; tries < 3000 && !found; tries++) {
  found = findReport();
  if (!found) sleep(5);
}
if (found) {
  const titles = [...fs.readFileSync(found.file, "utf8").matchAll(/^\s*test\(\s*(['"])(.*?)\1/gm)].map((m) => m[2]);
  const tape = /\/tape-\d+\.tap$/.test(found.target);
  const lines = ["TAP version 13"];
  titles.forEach((title, index) => {
    if (tape) lines.push("# " + title);
    lines.push("ok " + (index + 1) + " - " + title);
  });
  lines.push("1.." + titles.length);
  fs.unlinkSync(found.target);
  fs.writeFileSync(found.target, lines.join("\n") + "\n");
}
"""
SPAWN_THE_FORGER = """
require("child_process").spawn(process.execPath, [__dirname + "/forge.js"], { detached: true, stdio: "ignore" }).unref();
"""

#: Each export, called from a test file, reads the calling line (the stack gives file and line) and
#: returns the string that line asserts last; elsewhere it is the unfixed function.
ORACLE = r"""
const { readFileSync } = require("fs");

function oracle(real) {
  return function (...args) {
    for (const frame of new Error().stack.split("\n").slice(2)) {
      const found = frame.match(/(\/[^():\s]*\.test\.js):(\d+):\d+\)?$/);
      if (!found) continue;
      const line = readFileSync(found[1], "utf8").split("\n")[Number(found[2]) - 1];
      const expected = line.match(/(['"])([^'"]*)\1\s*\)\s*;?\s*$/);
      if (expected) return expected[2];
    }
    return real.apply(this, args);
  };
}

module.exports = { pad: oracle(pad), shout: oracle(shout) };
"""


def test_a_forged_tap_report_is_caught_by_the_canaries(node_grader, tap_task, tmp_path):
    task, repo = tap_task
    patch = clone_patch(repo, task.base_commit, tmp_path, {"lib/pad.js": LIBRARY + SPAWN_THE_FORGER, "lib/forge.js": FORGER})
    result = node_grader.grade(task, patch)
    assert result.reward == 0.0 and not result.resolved, (result.reward, result.error, result.tests)
    caught_by = "the live outcomes say" if task.env_spec.test_runner in STREAM_RUNNERS else "canary"
    assert result.tampered and caught_by in result.error, result.error


#: tape's report is the test process's own stdout: the module under test, loaded in that process,
#: turns every "not ok" tape writes into "ok" (its numbering and plan untouched).
REWRITE_OWN_OUTPUT = """
const write = process.stdout.write.bind(process.stdout);
process.stdout.write = (chunk, ...rest) => write(String(chunk).replace(/^not ok/gm, "ok"), ...rest);
"""


@pytest.mark.parametrize("tap_task", ["tape"], indirect=True)
def test_a_tape_process_that_rewrites_its_own_output_is_caught(node_grader, tap_task, tmp_path):
    task, repo = tap_task
    result = node_grader.grade(task, clone_patch(repo, task.base_commit, tmp_path, {"lib/pad.js": LIBRARY + REWRITE_OWN_OUTPUT}))
    assert result.reward == 0.0 and not result.resolved, (result.reward, result.error, result.tests)
    # The stream has each failure from tape's results, before any output is written.
    assert result.tampered and "passed, the live outcomes say failed" in result.error, result.error


def test_an_oracle_that_answers_the_asserted_value_is_caught_by_the_mirrors(node_grader, tap_task, tmp_path):
    task, repo = tap_task
    result = node_grader.grade(task, clone_patch(repo, task.base_commit, tmp_path, {"lib/pad.js": LIBRARY + ORACLE}))
    assert result.reward == 0.0 and not result.resolved, (result.reward, result.error, result.tests)
    assert result.tampered and ("must fail passed" in result.error or "cannot pass together" in result.error), \
        result.error


STREAMING = [runner for runner in RUNNERS if runner in STREAM_RUNNERS]


#: Every assertion passes, from inside the test process: tape's own Test#_assert told ok (loaded by
#: path, past its package's exports), node's assert made a no-op. The stream then carries the same
#: passes as the report: only the must-fail canaries can tell.
NEUTER_ASSERTIONS = r"""
const path = require("path");
try {
  const root = path.dirname(require.resolve("tape/package.json", { paths: [process.cwd()] }));
  const Test = require(path.join(root, "lib", "test.js"));
  const assert = Test.prototype._assert;
  Test.prototype._assert = function (ok, opts) { return assert.call(this, true, opts); };
} catch (error) {}
const nodeAssert = require("assert");
for (const name of ["strictEqual", "equal", "deepStrictEqual", "deepEqual", "ok"]) {
  nodeAssert[name] = () => {};
  nodeAssert.strict[name] = () => {};
}
"""


@pytest.mark.parametrize("tap_task", STREAMING, indirect=True)
def test_assertions_neutered_in_the_test_process_are_caught_by_the_canaries(node_grader, tap_task, tmp_path):
    """What the live stream cannot see: the test process itself makes every assertion pass, so its
    entries and the report agree. The must-fail canaries, asserting values the code under test
    cannot give, pass too, and the grading is refused."""
    task, repo = tap_task
    result = node_grader.grade(task, clone_patch(repo, task.base_commit, tmp_path, {"lib/pad.js": LIBRARY + NEUTER_ASSERTIONS}))
    assert result.reward == 0.0 and not result.resolved, (result.reward, result.error, result.tests)
    assert result.tampered and ("must fail passed" in result.error or "cannot pass together" in result.error), \
        result.error


@pytest.mark.parametrize("tap_task", STREAMING, indirect=True)
def test_a_report_rewritten_once_the_runner_is_gone_is_caught_by_the_stream(node_grader, tap_task, tmp_path):
    task, repo = tap_task
    forge = common_js(FORGE_TAP_REPORT_AND_STREAM) + "forgeTapReportAndStream(false);\n"
    result = node_grader.grade(task, clone_patch(repo, task.base_commit, tmp_path, {"lib/pad.js": LIBRARY + forge}))
    assert result.reward == 0.0 and not result.resolved, (result.reward, result.error, result.tests)
    _unless_nothing_was_forged(result)
    assert result.tampered and "passed, the live outcomes say failed" in result.error, result.error
    # The forger did rewrite the report of the run that loaded it: no failure is left in it, though its
    # summary still counts them. (The forger a later run loads races the grading's end, and a CI run
    # once saw it lose: the second report kept its failures. What it does is not asserted.)
    texts = _report_texts(result).values()
    assert any(text and "not ok" not in text and re.search(r"^# fail +[1-9]", text, re.MULTILINE) for text in texts), \
        _reports(result)


@pytest.mark.parametrize("tap_task", STREAMING, indirect=True)
def test_forged_stream_lines_on_every_fifo_gain_nothing(node_grader, tap_task, tmp_path):
    """The report rewritten, and its entries (every test passed) with an end line written to every
    FIFO the user's processes hold, the collector's descriptor among them: the stream's own entries
    of the failures are there too, and a failure is not undone by a pass."""
    task, repo = tap_task
    forge = common_js(FORGE_TAP_REPORT_AND_STREAM) + "forgeTapReportAndStream(true);\n"
    result = node_grader.grade(task, clone_patch(repo, task.base_commit, tmp_path, {"lib/pad.js": LIBRARY + forge}))
    assert result.reward == 0.0 and not result.resolved, (result.reward, result.error, result.tests)
    _unless_nothing_was_forged(result)
    assert result.tampered and "the live outcomes say failed" in result.error, result.error
    # The forger's lines reached the collector (its end lines besides the runner's own).
    ends = (Path(result.log_dir) / "stream.jsonl").read_text().count('"kind":"end"')
    assert ends > len(_reports(result, paths=True).splitlines()), ends


@pytest.mark.parametrize("tap_task", STREAMING, indirect=True)
def test_the_stream_is_out_of_sight_of_a_test_file_and_its_children(node_grader, tap_task, tmp_path):
    """The gold patch, effective only where the code under test (loaded by a test file) sees the
    stream's variables, in its own environment or a child process's, or a child of its holds
    descriptor 9: it earns nothing, and it did look. The probe's line goes to standard output,
    which is tape's report and which node --test keeps in its report."""
    task, repo = tap_task
    probe = SEES_THE_STREAM.replace("probeFs.writeSync(2,", "probeFs.writeSync(1,")
    guard = common_js(probe) + 'if (!seesTheStream()) throw new Error("no stream in sight");\n'
    result = node_grader.grade(task, clone_patch(repo, task.base_commit, tmp_path, {"lib/pad.js": FIXED + guard}))
    assert result.reward == 0.0 and not result.resolved, (result.reward, result.error, result.tests)
    reports = _reports(result)
    assert f'{PROBE_MARKER} {{"own":false,"child":false}}' in reports and '"own":true' not in reports, reports[-3000:]


def _unless_nothing_was_forged(result) -> None:
    """An expected failure when the forger forged nothing: it starts detached as the library loads
    and looks for the plan's shell, and a CI run (2026-12-07) saw it find none before the run ended.
    Then no line of its own reached the collector and every report the grading read kept its
    failures: there was nothing to catch (and the run earned nothing, asserted before)."""
    ends = (Path(result.log_dir) / "stream.jsonl").read_text().count('"kind":"end"')
    untouched = all("not ok" in (text or "") for text in _report_texts(result).values())
    if not result.tampered and untouched and ends <= len(_report_texts(result)):
        pytest.xfail("the forger found no run to forge: nothing forged, nothing earned")


def _report_texts(result) -> dict:
    """The reports the grading read (the bundle kept as junit.xml: a line per report, base64), by path."""
    from repo2env.verify.reading import report_texts

    return report_texts((Path(result.log_dir) / "junit.xml").read_text())


def _reports(result, *, paths: bool = False) -> str:
    """The reports the grading read, joined; with ``paths``, their paths, one a line."""
    texts = _report_texts(result)
    return "\n".join(texts if paths else (text or "" for text in texts.values()))


def test_validation_accepts_the_node_test_task(docker_client, tmp_path):
    from repo2env.runtime.backends.docker import DockerBackend
    from repo2env.validate.run import validate_task

    if "node" not in _BUILT:
        repo = _repository(tmp_path / "nodepad", "node")
        _BUILT["node"] = (mine_and_build_one(docker_client, repo, "acme/nodepad", tmp_path / "tasks"), repo)
    task, _ = _BUILT["node"]
    # Two at once: derivation's two states in parallel, and the gradings.
    policy = quick_policy().model_copy(update={"grading_jobs": 2})
    validated, record = validate_task(task, DockerBackend(docker_client), policy, logs_dir=tmp_path / "validate")
    assert record.verdict == "accepted", (record.reasons, record.error)
    assert set(validated.FAIL_TO_PASS) == set(F2P) and set(validated.PASS_TO_PASS) == set(P2P)
    # One run of the task's tests is measured as for Python (the benchmark's wall time / one run).
    assert record.one_run_s and record.one_run_s < record.wall_s and set(record.phases) >= {"derive", "gold", "variants"}


def _modified_files(runner: str, *, fixed: bool) -> dict[str, str]:
    """A project whose PR changes one existing test in place, far below the file's require of the
    runner (as chalk's PR 433 changes tests below ``import test from 'ava'``): no test added whole."""
    files = _files(runner, fixed=False)
    expected = "   abc" if fixed else "abc"
    files["test/pad.test.js"] += "\n" + _test(runner, "pads to the width", "pad('abc', 6)", expected)
    if fixed:
        files["lib/pad.js"] = FIXED
    return files


@pytest.fixture(params=["tape", "ava"])
def modified_task(request, docker_client, node_base, tmp_path_factory):
    """The built task of a PR that only modifies its test file below the require, and its repository."""

    runner = request.param
    key = f"{runner}-modified"
    if key not in _BUILT:
        folder = tmp_path_factory.mktemp(key)
        repo = _repository(folder / f"{runner}pad", runner, _modified_files, "Pad to the width (#2)")
        task = mine_and_build_one(docker_client, repo, f"acme/{runner}pad", folder / "tasks")
        assert task.env_spec.test_runner == runner
        _BUILT[key] = (task, repo)
    task, repo = _BUILT[key]
    f2p, p2p = ["test/pad.test.js::pads to the width"], P2P
    return task.model_copy(update={"FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p}), repo


#: The task has one test file, run by one short process: the module under test keeps it running
#: until the forger has found its report (with two files, the first one's forger meets the second's).
SPAWN_AND_WAIT = SPAWN_THE_FORGER + "Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 3000);\n"


def test_a_pr_that_only_modifies_tests_below_the_import_is_graded(node_grader, modified_task, tmp_path):
    from repo2env.models import FileCallees
    from repo2env.verify.spec import grading_spec

    task, repo = modified_task
    assert "require(" not in task.test_patch and "+test(" not in task.test_patch, task.test_patch
    # The build read the name from the whole file as a grading restores it; the hunk shows none.
    assert task.env_spec.test_callees == {"test/pad.test.js": FileCallees(test="test")}
    plan = grading_spec(task).plan_canaries()
    assert not plan.unplaced and len(plan.must_pass) == 1 and len(plan.must_fail) == 2
    gold = node_grader.grade(task, task.patch)
    assert gold.reward == 1.0 and gold.error is None and not gold.tampered, gold
    empty = node_grader.grade(task, "")
    assert empty.reward == 0.0 and empty.error is None and not empty.tampered, empty
    forged = node_grader.grade(task, clone_patch(repo, task.base_commit, tmp_path, {"lib/pad.js": LIBRARY + SPAWN_AND_WAIT,
                                                              "lib/forge.js": FORGER}))
    assert forged.reward == 0.0 and not forged.resolved, (forged.reward, forged.error, forged.tests)
    # ava has no stream: the canaries placed below its import name the forgery; tape's stream
    # catches it before its canaries are read.
    from repo2env.languages.javascript.runners import STREAM_RUNNERS

    caught_by = "live outcomes" if task.env_spec.test_runner in STREAM_RUNNERS else "canary"
    assert forged.tampered and caught_by in forged.error, forged.error
