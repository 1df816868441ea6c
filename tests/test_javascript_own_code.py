"""The JavaScript own-code check without Docker: which of the project's package names its tests
import by name (tree-sitter, then the files of a real git repository read through a shell that runs
commands in it), and the probe script run by the host's Node on a folder laid out as an install."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from repo2env.languages.javascript.build import _names_tests_import
from repo2env.languages.javascript.imports import imported_packages, package_name
from repo2env.models import ExecResult, Task

PROBE = Path(__file__).parents[1] / "repo2env/languages/javascript/own_code_probe.js"
needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="needs Node")


def test_bare_specifiers_name_packages_and_paths_do_not():
    assert [package_name(one) for one in ("chalk", "chalk/source/index.js", "@scope/pkg/sub", "@scope/pkg")] == [
        "chalk", "chalk", "@scope/pkg", "@scope/pkg"]
    assert [package_name(one) for one in ("..", ".", "../source/index.js", "./a", "/abs", "node:fs", "#internal",
                                          "https://x/y.js", "@scope")] == [None] * 9


def test_require_import_and_dynamic_import_by_name_are_found():
    assert imported_packages("const chalk = require('chalk');\n", ".js") == {"chalk"}
    assert imported_packages("import x from 'chalk';\nimport 'side-effect';\n", ".mjs") == {"chalk", "side-effect"}
    assert imported_packages("test('x', async () => { const sub = await import('chalk/sub'); });\n", ".js") == {"chalk"}
    assert imported_packages("export {red} from '@acme/colors/red';\nrequire.resolve(`chalk`);\n"
                             "jest.requireActual('ansi');\n", ".js") == {"@acme/colors", "chalk", "ansi"}


def test_relative_imports_and_non_loaders_name_no_package():
    text = ("import test from 'ava';\nconst chalk = require('..');\nimport other from '../source/index.js';\n"
            "const name = 'chalk';\nconsole.log('chalk');\nPromise.resolve('chalk');\nrequire(`${base}/chalk`);\n")
    assert imported_packages(text, ".js") == {"ava"}


def test_typescript_imports_by_name_are_found():
    text = ("import chalk = require('chalk');\nimport type {Options} from '@acme/core';\n"
            "import {expectType} from 'tsd';\nimport local from './local';\n")
    assert imported_packages(text, ".ts") == {"chalk", "@acme/core", "tsd"}
    assert imported_packages("import {render} from 'ink';\nconst App = () => <Box />;\n", ".tsx") == {"ink"}


def test_a_file_the_grammar_cannot_read_counts_the_names_it_quotes():
    # Flow's `import type` and a diff's loose lines: the tree may hide a specifier, so a quoted own
    # name counts (it is then checked), a mere word does not.
    hunk = "  const chalk = require('chalk/source'\n}) =>\n"
    assert imported_packages(hunk, ".js", among=["chalk", "ansi"]) == {"chalk"}
    assert imported_packages("}) => chalk.red(\n", ".js", among=["chalk"]) == frozenset()


class GitShell:
    """A task image's shell stand-in: runs each command in a real git work tree on the host."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.commands: list[list[str]] = []

    def exec(self, command, timeout=None) -> ExecResult:
        self.commands.append(command)
        ran = subprocess.run(command, cwd=self.root, capture_output=True, text=True, timeout=timeout,
                             shell=isinstance(command, str))
        return ExecResult(exit_code=ran.returncode, output=ran.stdout + ran.stderr)


def _repository(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "testbed"
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    for command in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "base"]):
        subprocess.run(command, cwd=root, check=True, env=env)
    return root


def _task(test_patch: str = "") -> Task:
    return Task(instance_id="acme__colors-2", repo="acme/colors", language="javascript", pull_number=2,
                base_commit="0" * 40, patch="", test_patch=test_patch, problem_statement="x",
                created_at="2020-01-01T00:00:00Z")


CHALK_LIKE = {
    "package.json": json.dumps({"name": "chalk", "devDependencies": {"ava": "*", "xo": "*"}}),
    "source/index.js": "module.exports = require('./util');\n",
    "benchmark.js": "const chalk = require('chalk');\n",  # not a test: never read
    "test/chalk.js": "import test from 'ava';\nconst chalk = require('../source');\ntest('red', t => t.pass());\n",
    "test/_fixture.js": "const chalk = require('..');\nconsole.log(chalk.red('x'));\n",
    "test/types.ts": "import chalk from '../source';\n",
}


@needs_node
def test_tests_that_import_the_project_by_path_need_no_name_check(tmp_path):
    shell = GitShell(_repository(tmp_path, CHALK_LIKE))
    assert _names_tests_import(shell, _task(), ["test"], ["chalk"]) == ()
    # Only the files that mention a name are read, in one node call.
    assert sum(command[:2] == ["node", "-e"] for command in shell.commands) == 1


@needs_node
def test_a_test_file_that_requires_the_package_by_name_keeps_the_check(tmp_path):
    files = {**CHALK_LIKE, "test/_helper.js": "module.exports = require('chalk/source/util');\n"}
    assert _names_tests_import(GitShell(_repository(tmp_path, files)), _task(), ["test"], ["chalk", "other"]) == ("chalk",)
    # The root folder reads only the files that are tests (benchmark.js is not).
    root_test = {**CHALK_LIKE, "test.js": "const chalk = require('.');\n"}
    assert _names_tests_import(GitShell(_repository(tmp_path / "root", root_test)), _task(), [""], ["chalk"]) == ()


@needs_node
def test_the_lines_the_pr_adds_to_a_test_count(tmp_path):
    patch = ("diff --git a/test/new.js b/test/new.js\nnew file mode 100644\n--- /dev/null\n+++ b/test/new.js\n"
             "@@ -0,0 +1,2 @@\n+import chalk from 'chalk';\n+test('x', t => t.pass());\n")
    shell = GitShell(_repository(tmp_path, CHALK_LIKE))
    assert _names_tests_import(shell, _task(patch), ["test"], ["chalk"]) == ("chalk",)


def test_files_that_cannot_be_read_keep_every_name_checked(tmp_path):
    # No git work tree: git grep fails, and the check must not be skipped for it.
    (tmp_path / "test").mkdir()
    assert _names_tests_import(GitShell(tmp_path), _task(), ["test"], ["chalk", "@acme/b"]) == ("chalk", "@acme/b")


def _probe(root: Path, settings: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["node", str(PROBE), "check", json.dumps({"root": str(root), **settings})],
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def installed(tmp_path) -> Path:
    """A root laid out as an install: a registry copy of chalk hoisted by a dev tool, and a workspace
    package linked into node_modules."""
    root = (tmp_path / "testbed").resolve()
    for folder in ("test", "node_modules/chalk", "node_modules/xo", "packages/colors/test"):
        (root / folder).mkdir(parents=True)
    (root / "node_modules/@acme").mkdir()
    (root / "node_modules/@acme/colors").symlink_to("../../packages/colors")
    return root


@needs_node
def test_the_probe_fails_on_a_name_the_tests_import_that_resolves_to_a_registry_copy(installed):
    ran = _probe(installed, {"names": ["chalk", "@acme/colors"], "from": ["test", "packages/colors/test"]})
    assert ran.returncode == 1
    assert ran.stdout.splitlines() == [
        "own-code check failed: chalk resolves to node_modules/chalk (a copy from the registry, not the project's "
        "code) from test",
        "own-code check failed: chalk resolves to node_modules/chalk (a copy from the registry, not the project's "
        "code) from packages/colors/test"]


@needs_node
def test_the_probe_says_a_name_no_test_imports_needs_no_check(installed):
    ran = _probe(installed, {"names": ["@acme/colors"], "unimported": ["chalk"], "from": ["test"]})
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.splitlines() == [
        "own-code check not needed: no test file in test imports chalk by name, the tests run the project's files "
        "by relative paths; node_modules/chalk is left to the tools that depend on it"]
