"""Test data a change adds is run by the test files that read it (repo2env.languages.javascript.data_tests).

The repositories here are written by the tests: a spec runner that makes a test of each Markdown
file in the folders it names (as marked does), beside a benchmark and an update script that read
the same folders and must never be run as tests.
"""

from __future__ import annotations

import json

import pytest

from repo2env.languages import get_profile
from repo2env.languages.files import DictRepoFiles
from repo2env.languages.javascript.data_tests import data_files, runner_files
from repo2env.languages.javascript.data_tests import tests_reading_data as readers
from repo2env.models import EnvSpec

_SPEC_RUNNER = """\
const { loadFiles } = require('../helpers/load.js');
function runSpecs(title, dir) { describe(title, () => { for (const spec of loadFiles(dir)) it(spec.name, () => {}); }); }
runSpecs('New', './new');
runSpecs('Original', './original');
"""
_BENCH = "const specs = require('./helpers/load.js').loadFiles(__dirname + '/specs/new');\n"


def _files(jasmine_files: list[str] | None = None, script: str = "jasmine --config=jasmine.json") -> DictRepoFiles:
    return DictRepoFiles({
        "package.json": json.dumps({"name": "mdlib", "scripts": {"test": script, "bench": "node test/bench.js"}}),
        "jasmine.json": json.dumps({"spec_dir": "test", "spec_files": jasmine_files or ["**/*-spec.js"]}),
        "lib/md.js": "module.exports = (text) => text;\n",
        "test/helpers/load.js": "exports.loadFiles = (dir) => [];\n",
        "test/specs/run-spec.js": _SPEC_RUNNER,
        "test/specs/new/heading.md": "# a\n", "test/specs/new/heading.html": "<h1>a</h1>\n",
        "test/specs/original/list.md": "- a\n",
        "test/specs/unread/table.md": "| a |\n",
        "test/unit/md-spec.js": "const md = require('../../lib/md.js');\nit('echoes', () => {});\n",
        "test/bench.js": _BENCH,
        "test/update-specs.js": "require('fs').writeFileSync('specs/new/x.md', '');\n",
    })


def test_the_data_a_change_adds_is_run_by_the_spec_runner_that_names_its_folder():
    files = _files()
    assert runner_files(files, "jasmine") == ["test/**/*-spec.js"]
    data = data_files(["test/specs/new/code.md", "test/specs/new/code.html", "lib/md.js", "test/unit/md-spec.js"])
    assert data == ["test/specs/new/code.md", "test/specs/new/code.html"]
    # Not the benchmark nor the update script (no file jasmine runs), though they read the folder.
    assert readers(data, files, "jasmine") == ["test/specs/run-spec.js"]
    assert readers(["test/specs/original/list.md"], files, "jasmine") == ["test/specs/run-spec.js"]


def test_data_no_test_file_reads_runs_nothing_more():
    files = _files()
    assert readers(["test/specs/unread/table.md"], files, "jasmine") == []
    # A runner whose files nothing names: every test file counts, and only one naming the folder.
    assert readers(["test/specs/unread/table.md"], files, "tape") == []


def test_the_runner_files_decide_among_the_readers():
    # node --test over the runner script: the script's path is the only file it runs.
    files = _files(script="node --test test/specs/run-spec.js")
    assert runner_files(files, "node") == ["test/specs/run-spec.js"]
    assert readers(["test/specs/new/a.md"], files, "node") == ["test/specs/run-spec.js"]
    # A jasmine configured for other files: the runner file is not among them, nothing is run.
    assert readers(["test/specs/new/a.md"], _files(["unit/**/*-spec.js"]), "jasmine") == []


def test_a_test_file_beside_its_data_names_the_file():
    files = DictRepoFiles({
        "package.json": json.dumps({"scripts": {"test": "mocha test/"}}),
        "test/cases.test.js": "const cases = require('./cases.json');\nit('runs', () => {});\n",
        "test/other.test.js": "it('other', () => {});\n",
        "test/cases.json": "[]",
    })
    assert readers(["test/cases.json"], files, "mocha") == ["test/cases.test.js"]


@pytest.mark.parametrize("paths", [["test/__snapshots__/a.test.js.snap"], ["jest.config.js"], ["lib/md.js"]])
def test_snapshots_configuration_and_source_are_no_data(paths):
    assert data_files(paths) == []


def test_the_profile_answers_for_a_built_task():
    profile = get_profile("javascript")
    spec = EnvSpec(status="env_ok", test_runner="jasmine")
    assert profile.tests_reading_data(["test/specs/new/a.md"], _files(), spec) == ["test/specs/run-spec.js"]
    assert profile.tests_reading_data(["test/unit/md-spec.js"], _files(), spec) == []
    assert get_profile("python").tests_reading_data(["tests/data/a.json"], _files(), None) == []
