"""A jest task graded for real (built from a repository made here, jest 29.7.0 from the npm registry
on the Node 18 base): the gold patch earns 1.0, the empty patch 0.0; a patch that rewrites jest's
report earns nothing and is caught by the live outcome stream jest's reporter (ours, beside the
``--json`` report) sends the root collector; forged stream lines gain nothing; the stream's
variables and descriptor are out of sight of the tests and of a child process they start.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from javascript_projects import fixture_git
from stream_probes import FORGE_REPORT_AND_STREAM, SEES_THE_STREAM, common_js

from repo2env.jsonl import read_tasks
from repo2env.mine.git import GitSource
from repo2env.mine.miner import MineOptions, mine
from repo2env.verify.grader import Grader

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
FIXED = """\
function pad(text, width) {
  return String(text).padStart(width);
}

function shout(text) {
  return text.toUpperCase() + "!";
}

module.exports = { pad, shout };
"""
_EXISTING = "".join(f"  it('keeps case {number}', () => {{\n    expect(pad('Ab{number}', 1)).toBe('Ab{number}');\n  }});\n\n"
                    for number in range(4))
PAD_TESTS = f"""\
const {{ pad }} = require('../lib/pad.js');

describe('pad', () => {{
{_EXISTING}  it('returns strings', () => {{
    expect(typeof pad(1, 3)).toBe('string');
  }});
}});
"""
ADDED_PAD_TESTS = """\
  it('pads to the width', () => {
    expect(pad('abc', 6)).toBe('   abc');
  });

  it('pads numbers too', () => {
    expect(pad(4096, 7)).toBe('   4096');
  });
"""
SHOUT_TESTS = """\
const { shout } = require('../lib/pad.js');

test('shouts a greeting', () => {
  expect(shout('hello world')).toBe('HELLO WORLD!');
});
"""
F2P = ["test/pad.test.js::pad > pads to the width", "test/pad.test.js::pad > pads numbers too",
       "test/shout.test.js::shouts a greeting"]
P2P = ["test/pad.test.js::pad > returns strings", *(f"test/pad.test.js::pad > keeps case {number}" for number in range(4))]

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


def _git(path: Path, *args: str, stamp: str = "2025-03-03T10:00:00+00:00") -> str:
    return fixture_git(path, *args, stamp=stamp)


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def _repository(path: Path) -> Path:
    """padkit with jest: one squashed PR (#1) that fixes lib/pad.js and adds its tests."""
    path.mkdir()
    _git(path, "init", "-q", "-b", "main")
    package = {"name": "padkit", "version": "1.0.0", "engines": {"node": ">=18 <20"},
               "scripts": {"test": "jest"}, "devDependencies": {"jest": "29.7.0"}}
    _write(path, {"package.json": json.dumps(package, indent=2) + "\n", ".gitignore": "node_modules/\n",
                  "lib/pad.js": LIBRARY, "test/pad.test.js": PAD_TESTS})
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "Initial commit")
    _write(path, {"lib/pad.js": FIXED, "test/shout.test.js": SHOUT_TESTS,
                  "test/pad.test.js": PAD_TESTS.removesuffix("});\n") + "\n" + ADDED_PAD_TESTS + "});\n"})
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "Pad to the width, shout louder (#1)\n\nPadding was ignored.",
         stamp="2025-03-04T10:00:00+00:00")
    return path


@pytest.fixture(scope="module")
def jest_task(docker_client, tmp_path_factory):
    """The built task (its ground truth's FAIL_TO_PASS and PASS_TO_PASS) and the repository."""
    from repo2env.pipeline.stages import build_tasks_dir
    from repo2env.runtime.backends.docker import DockerBackend
    from repo2env.runtime.node_bootstrap import ensure_node_base_image

    ensure_node_base_image(DockerBackend(docker_client), "18")
    folder = tmp_path_factory.mktemp("jest-task")
    repo = _repository(folder / "padkit")
    mine(GitSource(repo, repo="acme/padkit"), folder / "tasks", MineOptions(allow_no_issue=True))
    summary = build_tasks_dir(folder / "tasks", runtime=DockerBackend(docker_client))
    (task,) = read_tasks(folder / "tasks" / "tasks.jsonl")
    assert summary.ok == 1 and task.env_spec.test_runner == "jest", task.env_spec.error
    return task.model_copy(update={"FAIL_TO_PASS": F2P, "PASS_TO_PASS": P2P}), repo


@pytest.fixture(scope="module")
def grader(docker_client, tmp_path_factory):
    from repo2env.runtime.backends.docker import DockerBackend

    return Grader(DockerBackend(docker_client), tmp_path_factory.mktemp("jest-grades"), timeout_s=180)


def _patch(repo: Path, task, tmp_path: Path, files: dict[str, str]) -> str:
    """The diff of a clone at the task's base with ``files`` written."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    _git(clone, "checkout", "-q", task.base_commit)
    _write(clone, files)
    _git(clone, "add", "-A")
    return _git(clone, "diff", "--cached", task.base_commit) + "\n"


def _gains_nothing(result) -> None:
    assert result.reward == 0.0 and not result.resolved, (result.reward, result.error, result.tests)


def test_gold_earns_everything_and_nothing_earns_nothing(grader, jest_task):
    task, _ = jest_task
    gold = grader.grade(task, task.patch)
    assert gold.reward == 1.0 and gold.error is None and not gold.tampered, gold
    # jest's outcomes came through the stream: one entry per test file, and the end.
    stream = [json.loads(line) for line in (Path(gold.log_dir) / "stream.jsonl").read_text().splitlines()]
    assert [record["kind"] for record in stream] == ["entry", "entry", "end"], stream
    empty = grader.grade(task, "")
    assert empty.reward == 0.0 and empty.error is None and not empty.tampered, empty


@pytest.mark.alone  # a forger racing the grading's end: beside two other workers it can lose the race
def test_a_rewritten_report_is_caught_by_the_live_stream(grader, jest_task, tmp_path):
    task, repo = jest_task
    result = grader.grade(task, _patch(repo, task, tmp_path, {"lib/pad.js": FORGE_THE_REPORT + LIBRARY}))
    _gains_nothing(result)
    assert result.tampered and "passed, the live outcomes say" in result.error, result.error


@pytest.mark.alone  # a forger racing the grading's end: beside two other workers it can lose the race
def test_forged_lines_on_every_fifo_gain_nothing(grader, jest_task, tmp_path):
    task, repo = jest_task
    code = common_js(FORGE_REPORT_AND_STREAM) + "forgeReportAndStream();\n" + LIBRARY
    result = grader.grade(task, _patch(repo, task, tmp_path, {"lib/pad.js": code}))
    _gains_nothing(result)
    assert result.tampered and "the live outcomes say" in result.error, result.error
    # The forger's lines reached the collector (its end lines besides the reporter's one).
    assert (Path(result.log_dir) / "stream.jsonl").read_text().count('"kind":"end"') > 1


def test_the_stream_is_out_of_sight_of_the_tests_and_their_children(grader, jest_task, tmp_path):
    """The fix, effective only where the code under test sees the stream's variables (its own
    environment, a child's) or a child inherits descriptor 9: it earns nothing, and it did look."""
    task, repo = jest_task
    guard = common_js(SEES_THE_STREAM) + 'if (!seesTheStream()) throw new Error("no stream in sight");\n'
    result = grader.grade(task, _patch(repo, task, tmp_path, {"lib/pad.js": guard + FIXED}))
    _gains_nothing(result)
    output = (Path(result.log_dir) / "test_output.txt").read_text()
    assert '"own":false' in output and '"own":true' not in output and '"child":true' not in output, output[-2000:]
