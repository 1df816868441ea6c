"""A task whose PR adds test data only, graded for real (a repository made here, mocha 10.8.2 from the
npm registry, the Node 18 base).

mdkit renders Markdown; its tests are data, as marked's are: ``test/specs/run-spec.js`` makes a test
of each ``.md``/``.html`` pair it finds in ``./new``, and the PR that teaches the renderer emphasis
adds ``new/emphasis.md`` and ``.html`` and no test code. The build's check and derivation run the
file that reads the data (``data_tests.tests_reading_data``), so the task's FAIL_TO_PASS is the test
the data makes; validation accepts it (gold 1.0, the empty patch 0.0). The reader is a visible test
file: a patch that rewrites it (or its helper) so that every spec passes, or that adds the hidden
data itself, earns nothing, since the grader restores the test tree before it adds the hidden data.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import mine_and_build_one, quick_policy
from javascript_projects import clone_patch, fixture_git, write_files

pytestmark = [pytest.mark.docker, pytest.mark.slow]

RENDER = """\
function render(markdown) {
  return markdown.trim().split('\\n').map((line) => {
    const heading = line.match(/^(#{1,6}) (.*)$/);
    if (heading) return `<h${heading[1].length}>${heading[2]}</h${heading[1].length}>`;
    return `<p>${line}</p>`;
  }).join('\\n') + '\\n';
}

module.exports = { render };
"""
FIXED = RENDER.replace("    return `<p>${line}</p>`;",
                       "    return `<p>${line.replace(/\\*([^*]+)\\*/g, '<em>$1</em>')}</p>`;")
LOAD = """\
const fs = require('fs');
const path = require('path');

// Every pair NAME.md / NAME.html in a folder.
function loadSpecs(folder) {
  return fs.readdirSync(folder).filter((name) => name.endsWith('.md')).sort().map((name) => ({
    name: name.slice(0, -3),
    markdown: fs.readFileSync(path.join(folder, name), 'utf8'),
    html: fs.readFileSync(path.join(folder, name.slice(0, -3) + '.html'), 'utf8'),
  }));
}

module.exports = { loadSpecs };
"""
RUN_SPEC = """\
const assert = require('assert');
const path = require('path');
const { render } = require('../../lib/render');
const { loadSpecs } = require('../helpers/load');

function runSpecs(title, dir) {
  describe(title, () => {
    for (const spec of loadSpecs(path.resolve(__dirname, dir))) {
      describe(spec.name, () => {
        it('should pass', () => {
          assert.strictEqual(render(spec.markdown), spec.html);
        });
      });
    }
  });
}

runSpecs('New', './new');
"""
BENCH = """\
// Times the renderer over the specs; a benchmark, never a test.
const { loadSpecs } = require('./helpers/load');
const { render } = require('../lib/render');
for (const spec of loadSpecs(__dirname + '/specs/new')) render(spec.markdown);
"""
F2P = ["test/specs/run-spec.js::New > emphasis > should pass"]
P2P = ["test/specs/run-spec.js::New > heading > should pass", "test/specs/run-spec.js::New > paragraph > should pass"]


def _files(*, fixed: bool) -> dict[str, str]:
    package = {"name": "mdkit", "version": "1.0.0", "engines": {"node": ">=18 <20"},
               "scripts": {"test": "mocha test/specs/run-spec.js", "bench": "node test/bench.js"},
               "devDependencies": {"mocha": "10.8.2"}}
    files = {"package.json": json.dumps(package, indent=2) + "\n", ".gitignore": "node_modules/\n",
             "lib/render.js": FIXED if fixed else RENDER, "test/helpers/load.js": LOAD,
             "test/specs/run-spec.js": RUN_SPEC, "test/bench.js": BENCH,
             "test/specs/new/heading.md": "# Title\n", "test/specs/new/heading.html": "<h1>Title</h1>\n",
             "test/specs/new/paragraph.md": "plain words\n", "test/specs/new/paragraph.html": "<p>plain words</p>\n"}
    if fixed:
        files.update({"test/specs/new/emphasis.md": "some *stress* here\n",
                      "test/specs/new/emphasis.html": "<p>some <em>stress</em> here</p>\n"})
    return files


def _repository(path: Path) -> Path:
    path.mkdir()
    fixture_git(path, "init", "-q", "-b", "main", stamp="2025-03-03T10:00:00+00:00")
    write_files(path, _files(fixed=False))
    fixture_git(path, "add", "-A", stamp="2025-03-03T10:00:00+00:00")
    fixture_git(path, "commit", "-q", "-m", "Initial commit", stamp="2025-03-03T10:00:00+00:00")
    write_files(path, _files(fixed=True))
    fixture_git(path, "add", "-A", stamp="2025-03-04T10:00:00+00:00")
    fixture_git(path, "commit", "-q", "-m", "Render emphasis (#1)\n\n*stress* came out as is.",
                stamp="2025-03-04T10:00:00+00:00")
    return path


@pytest.fixture(scope="module")
def data_task(docker_client, tmp_path_factory):
    """The built task (validated: its derived FAIL_TO_PASS and PASS_TO_PASS) and its repository."""
    from repo2env.runtime.backends.docker import DockerBackend
    from repo2env.runtime.node_bootstrap import ensure_node_base_image
    from repo2env.validate.run import validate_task

    runtime = DockerBackend(docker_client)
    ensure_node_base_image(runtime, "18")
    folder = tmp_path_factory.mktemp("mdkit-task")
    repo = _repository(folder / "mdkit")
    task = mine_and_build_one(docker_client, repo, "acme/mdkit", folder / "tasks")
    assert task.pull_number == 1 and task.env_spec.test_runner == "mocha"
    validated, record = validate_task(task, runtime, quick_policy(), logs_dir=folder / "validate")
    return validated, record, repo


def test_the_data_a_pr_adds_is_derived_validated_and_accepted(data_task):
    task, record, _ = data_task
    assert record.verdict == "accepted", (record.reasons, record.error)
    assert task.FAIL_TO_PASS == F2P and sorted(task.PASS_TO_PASS) == P2P
    rewards = {rollout.name: rollout.reward for rollout in record.rollouts}
    assert rewards["gold-0"] == 1.0 and rewards["null-0"] == 0.0


#: Rewrites of the visible test files that make every spec pass whatever the renderer gives.
_LENIENT_RUN_SPEC = RUN_SPEC.replace("assert.strictEqual(render(spec.markdown), spec.html);", "render(spec.markdown);")
_LENIENT_LOAD = LOAD.replace("html: fs.readFileSync(path.join(folder, name.slice(0, -3) + '.html'), 'utf8'),",
                             "get html() { return require('../../lib/render').render(this.markdown); },")


@pytest.mark.parametrize("attempt", ["reader", "helper", "data"])
def test_a_patch_that_rewrites_the_reader_or_brings_the_data_earns_nothing(node_grader, data_task, tmp_path, attempt):
    task, _, repo = data_task
    files = {"reader": {"test/specs/run-spec.js": _LENIENT_RUN_SPEC},
             "helper": {"test/helpers/load.js": _LENIENT_LOAD},
             # The hidden data with an answer the unfixed renderer gives.
             "data": {"test/specs/new/emphasis.md": "some *stress* here\n",
                      "test/specs/new/emphasis.html": "<p>some *stress* here</p>\n"}}[attempt]
    graded = node_grader.grade(task, clone_patch(repo, task.base_commit, tmp_path, files))
    assert graded.reward == 0.0 and graded.error is None, graded
    gold = node_grader.grade(task, task.patch)
    assert gold.reward == 1.0 and not gold.tampered, gold
