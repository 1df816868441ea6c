"""The language seam: the registry, each profile's path rules, the per-change choice of a profile,
and mining a real git repository in each language (JavaScript beside Python, Go for a language no
profile covers)."""

from __future__ import annotations

import difflib
import json
import os
import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from repo2env.errors import InputError
from repo2env.jsonl import read_tasks
from repo2env.languages import (
    DEFAULT_LANGUAGE,
    PROFILES,
    DictRepoFiles,
    get_profile,
    language_names,
    profiles,
)
from repo2env.languages.choice import choose_profile, code_language
from repo2env.languages.javascript.environment import added_dependencies_install
from repo2env.languages.javascript.paths import javascript_paths
from repo2env.mine.git import GitSource
from repo2env.mine.miner import MineOptions, mine
from repo2env.mine.split import classify_path, split_diff
from repo2env.models import Funnel, Task

# --- the registry ---------------------------------------------------------------------------


def test_the_registry_names_each_profile_once_and_makes_one_instance():
    assert language_names() == ("python", "javascript") and DEFAULT_LANGUAGE == "python"
    assert [profile.name for profile in profiles()] == list(PROFILES)
    assert get_profile("javascript") is get_profile("javascript")
    assert get_profile().name == "python"
    with pytest.raises(InputError, match="no language profile 'cobol'") as raised:
        get_profile("cobol")
    assert "python, javascript" in (raised.value.hint or "")


def test_a_row_without_a_language_is_python_and_a_language_is_carried_through_rows():
    from repo2env.dataset_rows import dataset_row, task_from_row

    row = {"instance_id": "a__b-1", "repo": "a/b", "pull_number": 1, "base_commit": "0" * 40, "patch": "",
           "test_patch": "", "problem_statement": "x", "created_at": "2024-01-01T00:00:00Z"}
    assert Task.from_row(row).language == "python"
    task = Task.from_row({**row, "language": "javascript"})
    published = dataset_row(task)
    assert published["language"] == "javascript"
    assert task_from_row(published).language == "javascript"
    assert task_from_row({key: value for key, value in published.items() if key != "language"}).language == "python"
    with pytest.raises(Exception, match="language"):
        Task.from_row({**row, "language": "Java Script"})


# --- path rules -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["tests/test_a.py", "src/pkg/core.py", "docs/conf.py", "CHANGES.rst", "tox.ini",
                                  "src/_pytest/main.py", "pyproject.toml", "docs/usage.md", "test.py"])
def test_the_python_profile_is_the_split_s_default(path):
    rules = get_profile("python").path_rules()
    assert classify_path(path) == rules.classify(path) == classify_path(path, rules)


@pytest.mark.parametrize(("path", "kind"), [
    ("test/format.test.js", "test"), ("tests/unit/a.js", "test"), ("src/__tests__/pad.ts", "test"),
    ("src/pad.test.ts", "test"), ("src/pad.spec.tsx", "test"), ("lib/pad.test.mjs", "test"),
    ("index.test-d.ts", "test"), ("test.js", "test"), ("spec/pad_spec.js", "test"),
    ("src/__mocks__/fs.js", "test"), ("src/__snapshots__/pad.test.ts.snap", "test"),
    ("jest.config.js", "test"), ("packages/core/vitest.config.ts", "test"), (".mocharc.yml", "test"),
    ("ava.config.cjs", "test"), ("test/mocha.opts", "test"), ("src/setupTests.ts", "test"),
    ("src/index.js", "source"), ("src/test.js", "source"), ("lib/attest.js", "source"), ("package.json", "source"),
    ("package-lock.json", "source"), ("tsconfig.json", "source"), ("news/feed.js", "source"),
    ("packages/core/src/pad.ts", "source"), ("types/index.d.ts", "source"), ("webpack.config.js", "source"),
    ("CHANGELOG.md", "aux"), ("docs/api.md", "aux"), ("docs/.vitepress/theme/index.ts", "aux"),
    ("README", "aux"), ("docs/logo.svg", "aux"),
])
def test_javascript_paths(path, kind):
    assert get_profile("javascript").path_rules().classify(path) == kind
    assert bool(re.search(get_profile("javascript").path_rules().test_pattern(), path)) == (kind == "test")


def test_javascript_test_folders_named_by_the_runner_configuration():
    files = DictRepoFiles({
        "package.json": json.dumps({"scripts": {"test": "nyc mocha --require checks/setup.js checks/",
                                                "test:types": "tsd"},
                                    "jest": {"roots": ["<rootDir>/unit-checks"]},
                                    "ava": {"files": ["src/**"]}}),
        ".mocharc.yml": "spec: 'acceptance/**/*.spec.js'\n",
        "jest.config.js": "module.exports = {\n  testMatch: ['<rootDir>/verify/**/*.js', '**/*.unit.js'],\n};\n",
    })
    rules = javascript_paths(files)
    assert {"checks", "unit-checks", "verify"} <= set(rules.test_dirs)
    assert "src" not in rules.test_dirs and "acceptance" not in rules.test_dirs  # a source root; a file pattern
    for path in ("checks/pad.js", "unit-checks/a.js", "verify/x/y.js"):
        assert rules.classify(path) == "test" and re.search(rules.test_pattern(), path)
    assert rules.classify("src/pad.js") == "source" and not re.search(rules.test_pattern(), "src/pad.js")
    assert javascript_paths(DictRepoFiles({"package.json": "{not json"})).test_dirs == ()


def test_test_configuration_alone_is_no_test_change():
    assert get_profile("python").path_rules().is_test_config("a/tox.ini")
    javascript = get_profile("javascript").path_rules()
    assert javascript.is_test_config("jest.config.ts") and javascript.is_test_config("packages/a/.mocharc.json")
    assert not javascript.is_test_config("test/pad.test.js")


# --- choosing a profile per change ----------------------------------------------------------------

_JS_REPO = DictRepoFiles({"package.json": "{}", "src/a.js": "", "setup.py": ""})
_WORKSPACE = DictRepoFiles({"packages/core/package.json": "{}", "packages/core/src/a.ts": ""})


@pytest.mark.parametrize(("paths", "files", "language", "reason"), [
    (["src/pkg/a.py", "tests/test_a.py"], DictRepoFiles(), "python", None),
    (["src/a.js", "test/a.test.js"], _JS_REPO, "javascript", None),
    (["packages/core/src/a.ts"], _WORKSPACE, "javascript", None),  # a workspace package, no root package.json
    (["src/a.js", "test/a.test.js"], DictRepoFiles({"setup.py": ""}), None, "unsupported_language"),
    (["src/a.py", "web/app.js", "tests/test_a.py"], _JS_REPO, None, "mixed_languages"),
    (["src/a.py", "web/app.js"], DictRepoFiles({"setup.py": ""}), "python", None),  # the JS part cannot be built
    (["src/a.py", "docs/_static/custom.js"], _JS_REPO, "python", None),  # docs code is no code change
    (["cmd/main.go", "cmd/main_test.go"], DictRepoFiles({"go.mod": ""}), None, "unsupported_language"),
    (["README.md", "docs/a.md"], _JS_REPO, None, None),
    (["ext/_speedups.c", "tests/test_speedups.py"], DictRepoFiles(), None, "unsupported_language"),
])
def test_a_change_belongs_to_the_profile_whose_code_its_fix_changes(paths, files, language, reason):
    choice = choose_profile(paths, files)
    assert (choice.profile.name if choice.profile else None) == language
    assert (choice.rejection[0] if choice.rejection else None) == reason
    if reason == "mixed_languages":
        assert "Python (src/a.py) and JavaScript (web/app.js)" in choice.rejection[1]
        assert choice.languages == ("python", "javascript")
    if reason == "unsupported_language":
        assert choice.languages and all(name in choice.rejection[1] for name in choice.languages)


def test_code_languages_are_named_by_suffix():
    assert code_language("cmd/main.go") == "go" and code_language("src/lib.RS") == "rust"
    assert code_language("Makefile") is None and code_language("setup.cfg") is None


def test_a_javascript_split_uses_the_repository_s_test_folders():
    diff = ("diff --git a/checks/pad.js b/checks/pad.js\n--- a/checks/pad.js\n+++ b/checks/pad.js\n"
            "@@ -1 +1 @@\n-a\n+b\n"
            "diff --git a/lib/pad.js b/lib/pad.js\n--- a/lib/pad.js\n+++ b/lib/pad.js\n@@ -1 +1 @@\n-a\n+b\n")
    files = DictRepoFiles({"package.json": json.dumps({"scripts": {"test": "mocha checks"}})})
    parts = split_diff(diff, get_profile("javascript").path_rules(files))
    assert parts.test_files == ("checks/pad.js",) and parts.source_files == ("lib/pad.js",) and parts.touches_code
    python = split_diff(diff)
    assert python.source_files == ("checks/pad.js", "lib/pad.js") and not python.touches_code


# --- building: the JavaScript recipe's inference (tests/test_javascript_build.py builds images) ---


def test_the_inferred_javascript_spec_without_docker():
    files = DictRepoFiles({
        "package.json": json.dumps({"name": "@acme/monorepo", "private": True, "workspaces": ["packages/*"],
                                    "devDependencies": {"jest": "^29.0.0"}}),
        "yarn.lock": "# THIS IS AN AUTOGENERATED FILE.\n# yarn lockfile v1\n",
        ".nvmrc": "18\n",
        "packages/core/package.json": json.dumps({"name": "@acme/core", "scripts": {"test": "jest --runInBand"}}),
        "packages/core/src/a.js": "", "packages/web/package.json": json.dumps({"name": "@acme/web"}),
    })
    recipe = get_profile("javascript").build_recipe()
    spec = recipe.infer_env_spec(files, datetime(2024, 1, 2, tzinfo=UTC),
                                 touched=["packages/core/src/a.js", "packages/core/__tests__/a.test.js"])
    assert (spec.node, spec.base, spec.package_manager, spec.test_runner) == ("18", "node18", "yarn", "jest")
    assert spec.package_dir == "packages/core" and spec.dependency_pin == "lockfile yarn.lock"
    assert spec.test_cmd == "jest --runInBand"
    assert recipe.own_code(files).names == ("@acme/monorepo", "@acme/core", "@acme/web")
    ladder = recipe.install_ladder(spec, files)
    assert [name for name, _ in ladder][0] == "inferred" and len(ladder) >= 2
    assert ladder[1][1].install[0].endswith("--ignore-scripts")
    # The dependencies' fingerprint ignores the version and the code, not a dependency change.
    fingerprint = recipe.dependency_fingerprint(files)
    assert recipe.dependency_fingerprint(DictRepoFiles({**files, "packages/core/src/a.js": "x"})) == fingerprint
    bumped = json.dumps({"name": "@acme/core", "version": "2.0.0", "scripts": {"test": "jest --runInBand"}})
    assert recipe.dependency_fingerprint(DictRepoFiles({**files, "packages/core/package.json": bumped})) == fingerprint
    assert recipe.dependency_fingerprint(DictRepoFiles({**files, "yarn.lock": "# changed\n"})) != fingerprint


def test_a_change_whose_tests_only_a_browser_runner_runs_is_refused_with_the_reason():
    # axios 2019-2022: mocha over test/unit, karma over test/specs/**/*.spec.js (in a browser).
    karma = "module.exports = function (config) { config.set({ files: ['test/specs/**/*.spec.js'] }) }\n"
    files = DictRepoFiles({
        "package.json": json.dumps({"name": "web", "scripts": {"test": "grunt test"},
                                    "devDependencies": {"mocha": "^8.0.0", "karma": "^6.0.0"}}),
        "karma.conf.js": karma, "lib/a.js": "", "test/unit/a.js": "", "test/specs/a.spec.js": "",
    })
    recipe = get_profile("javascript").build_recipe()
    moment = datetime(2022, 1, 2, tzinfo=UTC)
    with pytest.raises(InputError, match=r"test/specs/a\.spec\.js\) are karma\.conf\.js's, a browser runner "
                                         r"\(karma\) no profile runs; mocha runs test/\*\.js"):
        recipe.infer_env_spec(files, moment, touched=["lib/a.js", "test/specs/a.spec.js"])
    # A test mocha runs (its script's paths, or its config's spec) is mocha's, karma's config or not.
    assert recipe.infer_env_spec(files, moment, touched=["lib/a.js", "test/specs/a.spec.js", "test/unit/a.js"])
    named = {**files, "package.json": json.dumps({"name": "web", "scripts": {"test": "mocha test/specs"},
                                                   "devDependencies": {"mocha": "^8.0.0"}})}
    assert recipe.infer_env_spec(DictRepoFiles(named), moment, touched=["test/specs/a.spec.js"]).test_runner == "mocha"
    spec = {**files, ".mocharc.json": json.dumps({"spec": "test/**/*.spec.js"})}
    assert recipe.infer_env_spec(DictRepoFiles(spec), moment, touched=["test/specs/a.spec.js"]).test_runner == "mocha"
    # Without a browser runner's configuration there is no telling: the file is run (and read) as mocha's.
    alone = {path: text for path, text in files.items() if path != "karma.conf.js"}
    assert recipe.infer_env_spec(DictRepoFiles(alone), moment, touched=["test/specs/a.spec.js"]).test_runner == "mocha"


def test_derivation_and_grading_run_the_tests_with_the_options_and_variables_the_build_read():
    # dayjs: the first jest the test script runs is test-tz's, in Auckland; marked: jasmine's config.
    files = DictRepoFiles({"package.json": json.dumps({
        "scripts": {"test": "TZ=Pacific/Auckland npm run test-tz && jest", "test-tz": "jest test/timezone.test --bail"},
        "devDependencies": {"jest": "^24"}})})
    recipe = get_profile("javascript").build_recipe()
    spec = recipe.infer_env_spec(files, datetime(2024, 1, 2, tzinfo=UTC), touched=["src/a.js", "test/a.test.js"])
    assert (spec.test_cmd, spec.test_env) == ("jest", {"TZ": "Pacific/Auckland"})
    # The facts a grading uses have no files: the spec carries what the build read.
    command = get_profile("javascript").test_runner(spec).plan(["test/a.test.js::adds"], "/tmp/r").command
    assert "TZ=Pacific/Auckland" in command.split(";")[0] and "--bail" not in command
    jasmine = spec.model_copy(update={"test_runner": "jasmine", "test_cmd": "jasmine --config=jasmine.json",
                                      "test_env": {}})
    command = get_profile("javascript").test_runner(jasmine).plan(["test/a-spec.js::adds"], "/tmp/r").command
    assert "jasmine --config=jasmine.json --reporter=" in command and "TZ=" not in command
    # An override's own test command is not the runner's: nothing is taken from it.
    odd = spec.model_copy(update={"test_cmd": "npx jest --bail", "test_env": {}})
    assert "--bail" not in get_profile("javascript").test_runner(odd).plan(["test/a.test.js"], "/tmp/r").command


def test_the_packages_a_pr_adds_to_package_json_are_installed_after_the_base_commits(tmp_path):
    package = {"name": "padkit", "scripts": {"test": "mocha"}, "devDependencies": {"mocha": "^10.0.0"}}
    files = DictRepoFiles({"package.json": json.dumps(package, indent=2) + "\n"})
    after = {**package, "dependencies": {"left-pad": "1.3.0"}}
    gold = "diff --git a/package.json b/package.json\n" + "".join(difflib.unified_diff(
        files.read("package.json").splitlines(keepends=True), (json.dumps(after, indent=2) + "\n").splitlines(keepends=True),
        "a/package.json", "b/package.json"))
    recipe = get_profile("javascript").build_recipe()
    moment = datetime(2024, 1, 2, tzinfo=UTC)
    spec = recipe.infer_env_spec(files, moment, touched=["package.json"], patches=[gold, ""])
    assert spec.added_dependencies == {"left-pad": "1.3.0"}
    assert recipe.infer_env_spec(files, moment).added_dependencies == {}
    own = recipe.own_code(files)
    steps = {name: recipe.env_layer(rung, own, "", agent_uid=1000).run for name, rung in recipe.install_ladder(spec, files)}
    assert all(rung.added_dependencies == spec.added_dependencies for _, rung in recipe.install_ladder(spec, files))
    # After the base commit's install, with its pin; never saved to package.json or the lock file.
    first = steps["inferred"]
    assert first.index("npm install --no-audit --no-fund --no-package-lock --before") < first.index(
        "npm install --no-save") < first.index("find /testbed")
    assert "--no-save --no-audit --no-fund --legacy-peer-deps --before=2024-01-02T00:00:00Z left-pad@1.3.0" in first
    assert "--legacy-peer-deps --ignore-scripts --before=2024-01-02T00:00:00Z left-pad@1.3.0" in steps["no-scripts"]
    assert "--legacy-peer-deps left-pad@1.3.0" in steps["unpinned"]
    assert "--no-save" not in recipe.env_layer(spec.model_copy(update={"added_dependencies": {}}), own, "",
                                               agent_uid=1000).run
    assert "not installed (left-pad@1.3.0): pnpm" in recipe.env_layer(
        spec.model_copy(update={"package_manager": "pnpm"}), own, "", agent_uid=1000).run
    # A failure to install them does not fail the layer (set -e): it says so in the build log.
    (tmp_path / "npm").write_text("#!/bin/sh\nexit 1\n")
    (tmp_path / "npm").chmod(0o755)
    command = added_dependencies_install("npm", spec.added_dependencies)
    done = subprocess.run(["sh", "-c", f"set -e; ({command}); echo built"], capture_output=True, text=True,
                          env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"})
    assert done.returncode == 0 and done.stdout.splitlines() == [
        "repo2env: the PR's added dependencies: failed to install (left-pad@1.3.0); the tests that need them will "
        "not load", "built"]


# --- mining real repositories ---------------------------------------------------------------------


class _Repo:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.clock = 0
        path.mkdir()
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        self.clock += 1
        stamp = f"2023-05-{1 + self.clock // 24:02d}T{self.clock % 24:02d}:00:00+00:00"
        env = {**os.environ, "GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.com",
               "GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.com", "GIT_AUTHOR_DATE": stamp,
               "GIT_COMMITTER_DATE": stamp, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
        done = subprocess.run(["git", "-C", str(self.path), *args], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def commit(self, message: str, files: dict[str, str]) -> None:
        for name, text in files.items():
            (self.path / name).parent.mkdir(parents=True, exist_ok=True)
            (self.path / name).write_text(text)
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)


def _pad(body: str) -> str:
    return f"'use strict';\n\nfunction pad(text, width) {{\n{body}}}\n\nmodule.exports = {{ pad }};\n"


@pytest.fixture(scope="module")
def padkit(tmp_path_factory) -> Path:
    """A JavaScript library whose history lands squashed PRs of every kind the miner must tell apart."""
    repo = _Repo(tmp_path_factory.mktemp("js") / "padkit")
    repo.commit("Initial commit", {
        "package.json": json.dumps({"name": "padkit", "version": "2.3.1", "main": "lib/pad.js",
                                    "scripts": {"test": "mocha checks/"}, "devDependencies": {"mocha": "^10.2.0"}},
                                   indent=2) + "\n",
        "lib/pad.js": _pad("  return text;\n"),
        "checks/pad.js": "const { pad } = require('../lib/pad');\n",
        "README.md": "# padkit\n",
        "tools/gen.go": "package main\n",
        "scripts/release.py": "print('release')\n",
    })
    repo.commit("Pad to the width (#1)\n\nPadding was ignored.", {
        "lib/pad.js": _pad("  return text.padStart(width);\n"),
        "checks/pad.js": "const { pad } = require('../lib/pad');\nit('pads', () => pad('a', 2));\n",
        "CHANGELOG.md": "## 2.3.2\n",
    })
    repo.commit("Generate the tables in Go (#2)", {"tools/gen.go": "package main\n\nfunc main() {}\n",
                                                   "tools/gen_test.go": "package main\n"})
    repo.commit("Release from the build script (#3)", {
        "scripts/release.py": "print('release', 2)\n", "lib/pad.js": _pad("  return String(text).padStart(width);\n"),
        "checks/pad.js": "const { pad } = require('../lib/pad');\nit('pads numbers', () => pad(1, 2));\n",
    })
    repo.commit("Document padding (#4)", {"README.md": "# padkit\n\npad(text, width)\n"})
    repo.commit("Add a core package (#5)", {
        "package.json": json.dumps({"name": "padkit", "version": "2.4.0", "workspaces": ["packages/*"],
                                    "scripts": {"test": "mocha checks/"}}, indent=2) + "\n",
        "packages/core/package.json": '{"name": "@padkit/core", "version": "0.1.0"}\n',
        "packages/core/src/width.ts": "export const width = (text: string) => text.length;\n",
    })
    repo.commit("Count wide characters (#6)", {
        "packages/core/src/width.ts": "export const width = (text: string) => [...text].length;\n",
        "packages/core/__tests__/width.test.ts": "import { width } from '../src/width';\n",
    })
    return repo.path


def test_mining_a_javascript_repository(padkit, tmp_path):
    result = mine(GitSource(padkit, repo="acme/padkit"), tmp_path, MineOptions(allow_no_issue=True))
    tasks = {task.pull_number: task for task in read_tasks(tmp_path / "tasks.jsonl")}
    assert sorted(tasks) == [1, 6]
    assert {task.language for task in tasks.values()} == {"javascript"}
    first = tasks[1]
    assert "lib/pad.js" in first.patch and "checks/pad.js" in first.test_patch and "CHANGELOG.md" in first.aux_patch
    assert first.version == "2.3" and first.scm_version == ""
    assert "packages/core/__tests__/width.test.ts" in tasks[6].test_patch and tasks[6].version == "2.4"
    funnel = Funnel.model_validate_json((tmp_path / "funnel.json").read_text())
    reasons = {rejection.pull_number: (rejection.reason, rejection.detail) for rejection in funnel.rejections}
    assert reasons[2][0] == "unsupported_language" and "go (tools/gen.go, tools/gen_test.go)" in reasons[2][1]
    assert reasons[3][0] == "mixed_languages" and "Python (scripts/release.py)" in reasons[3][1]
    assert reasons[4][0] == "no_source_change"
    assert reasons[5][0] == "no_test_changes"
    assert funnel.languages == {"javascript": 4, "go": 1, "python": 1}
    assert result.funnel.counts["kept"] == 2


# --- what grading and validation ask of a profile ---------------------------------------------------


def test_the_runner_facts_grading_reads():
    from repo2env.languages.python.runner import RUNNER_PATTERN
    from repo2env.models import EnvSpec
    from repo2env.verify.filtering import is_protected_path

    python = get_profile("python").test_runner()
    assert (python.name, python.report_format, python.runner_pattern) == ("pytest", "junit-xml", RUNNER_PATTERN)
    assert all(is_protected_path(name) for name in python.config_patterns if "*" not in name)
    files = DictRepoFiles({"package.json": json.dumps({"scripts": {"test": "mocha --require test/setup.js --check-leaks"},
                                                       "mocha": {"timeout": 5000}}),
                           "test/setup.js": "", ".mocharc.yml": "", "lib/a.js": ""})
    facts = get_profile("javascript").test_runner(EnvSpec(test_runner="mocha", package_dir=""), files)
    assert (facts.name, facts.report_format) == ("mocha", "mocha-json")
    assert {"package.json", ".mocharc*", "test/setup.js", ".mocharc.yml"} <= set(facts.config_patterns)
    assert "lib/a.js" not in facts.config_patterns and {"mocha", "scripts"} <= set(facts.config_fields)
    plan = facts.plan(["test/a.test.js::pad > pads numbers"], "/tmp/reports")
    assert "--require test/setup.js" in plan.command and "--check-leaks" in plan.command
    assert "--grep" in plan.command and "pad pads numbers" in plan.command
    assert [report.file for report in plan.reports] == ["test/a.test.js"]
    assert facts.split_id("test/a.test.js::pad > pads numbers") == ("test/a.test.js", ("pad", "pads numbers"))
    with pytest.raises(ValueError):
        get_profile("javascript").test_runner()


def test_variants_are_the_profile_s():
    from repo2env.languages.python.variants import PythonVariants

    before = {"src/pad.py": "def pad(text, width):\n    return text\n"}
    after = {"src/pad.py": "def pad(text, width):\n    if width > len(text):\n        return ' ' * (width - len(text)) + text\n"
                           "    return text\n"}
    python = get_profile("python").variants()
    assert isinstance(python, PythonVariants)
    assert python.near_misses(before, after, limit=3) and python.stubs(before, after, limit=2)
    javascript = get_profile("javascript").variants()
    diff = ("diff --git a/lib/a.js b/lib/a.js\n--- a/lib/a.js\n+++ b/lib/a.js\n@@ -1,3 +1,3 @@\n-a\n+b\n c\n d\n"
            "@@ -10,3 +10,3 @@\n-e\n+f\n g\n h\n")
    assert [variant.name for variant in javascript.partial_fixes(diff, limit=2)] == ["hunks-1of2", "hunks-2of2"]
    assert javascript.near_misses({"lib/a.js": "a"}, {"lib/a.js": "b"}) == []


def test_facts_stated_twice_agree():
    from repo2env.languages.build import OWN_CODE_MARKER
    from repo2env.languages.javascript.build import NODE_BASE_PYTHONS
    from repo2env.languages.python.own_code_probe import MARKER
    from repo2env.runtime.node_bootstrap import DEBIAN_NODE

    assert MARKER == OWN_CODE_MARKER  # the probe is a standalone script: it cannot import the constant
    assert (Path(__file__).parents[1] / "repo2env/languages/javascript/own_code_probe.js").read_text().count(
        f"const MARKER = '{OWN_CODE_MARKER}';") == 1
    assert NODE_BASE_PYTHONS == {node: python for node, (_, python) in DEBIAN_NODE.items()}


def test_the_javascript_ladder_follows_what_an_install_log_says():
    recipe = get_profile("javascript").build_recipe()
    files = DictRepoFiles({"package.json": json.dumps({"scripts": {"test": "mocha"}, "devDependencies": {"mocha": "^6"},
                                                       "engines": {"node": ">= 0.10.0"}})})
    bases = ("node12", "node18", "node20", "py3.11")
    spec = recipe.infer_env_spec(files, datetime(2019, 6, 1, tzinfo=UTC), bases=bases)
    assert (spec.node, spec.dependency_pin) == ("12", "before 2019-06-01T00:00:00Z")
    ladder = recipe.install_ladder(spec, files, bases=bases)
    assert [name for name, _ in ladder] == ["inferred", "no-scripts", "unpinned", "unpinned+newer-node",
                                            "unpinned-no-scripts"]
    assert dict(ladder)["unpinned-no-scripts"].date_pin is None
    newer = dict(ladder)["unpinned+newer-node"]
    assert (newer.node, newer.base, newer.python, newer.date_pin) == ("20", "node20", "3.13", None)
    # A registry whose dates are its own (npm's ETARGET "... with a date before ...") skips every
    # rung that keeps the pin; npm's ERESOLVE brings the failed rung back with --legacy-peer-deps.
    dates = "npm ERR! notarget No matching version found for mocha@6.2.3 with a date before 6/1/2019."
    assert [name for name, _ in recipe.rungs_after_failure(dates, ladder[0], ladder[1:])] == [
        "unpinned", "unpinned+newer-node", "unpinned-no-scripts"]
    after = recipe.rungs_after_failure("npm ERR! code ERESOLVE", ladder[2], ladder[3:])
    assert [name for name, _ in after] == ["unpinned+legacy-peer-deps", "unpinned+newer-node", "unpinned-no-scripts"]
    assert all(spec.install[-1].endswith("--legacy-peer-deps") for _, spec in after)
    # A lock file that fetches a package from a git host: every rung installing from it goes.
    locked = DictRepoFiles({**files, "package-lock.json": json.dumps({"lockfileVersion": 3, "packages": {}})})
    spec = recipe.infer_env_spec(locked, datetime(2024, 6, 1, tzinfo=UTC), bases=bases)
    ladder = recipe.install_ladder(spec, locked, bases=bases)
    assert [name for name, _ in ladder][:3] == ["inferred", "no-scripts", "npm-install"]
    github = ("npm ERR! network request to https://github.com/markedjs/marked/tarball/v13.0.1 failed, "
              "reason: getaddrinfo ENOTFOUND github.com")
    assert all(spec.dependency_pin.startswith("lockfile") for _, spec in ladder)
    assert recipe.rungs_after_failure(github, ladder[0], ladder[1:]) == []
    # The same log on a rung without the lock file leaves the rest of the ladder as it was.
    assert recipe.rungs_after_failure(github, ("unpinned", ladder[0][1].model_copy(update={"dependency_pin": None})),
                                      ladder[1:]) == ladder[1:]
    logged = f"{github}\nnpm ERR! A complete log of this run can be found in:\nnpm ERR!     /root/.npm/_logs/x-debug-0.log\n"
    assert recipe.explain_failure(logged, ladder[0][1]) == (
        "a dependency is fetched from a git host, not from the registry (only the registry may be reachable): "
        + github[:200])
    # As Docker logs an install: each stderr chunk coloured and followed by a line break, then its own
    # message naming the command. The reason quotes npm's line, not the command.
    docker = ("\x1b[91mnpm ERR! code\x1b[0m\n\x1b[91m ETARGET\n\x1b[0m\n\x1b[91mnpm ERR! notarget No matching version "
              "found for cbor2@^2.4.0.\nnpm ERR! notarget In most cases you or one of your dependencies are requesting\n"
              "npm ERR! notarget a package version that doesn't exist.\n\x1b[0m\n\x1b[91mnpm ERR! A complete log of this run can be found in:\n"
              "npm ERR!     /root/.npm/_logs/x-debug-0.log\n\x1b[0m\nThe command '/bin/sh -c set -e; npm install' "
              "returned a non-zero code: 1\n")
    assert recipe.explain_failure(docker, ladder[0][1]) == (
        "the registry has no version a dependency range asks for (a registry mirror may lack it): "
        "npm ERR! notarget No matching version found for cbor2@^2.4.0.")
    # An install error no class covers is quoted too; a log with no install error leaves the build's message.
    assert recipe.explain_failure("npm ERR! code E418\nnpm ERR! I am a teapot", ladder[0][1]) == (
        "the install failed: npm ERR! I am a teapot")
    assert recipe.explain_failure("The command '/bin/sh -c npm install' returned a non-zero code: 1", ladder[0][1]) is None
    # Python's recipe leaves the ladder to its own rungs.
    python = get_profile("python").build_recipe()
    assert python.rungs_after_failure("npm ERR! code ERESOLVE", ladder[0], ladder[1:]) == ladder[1:]


def test_every_registered_language_is_graded():
    """Validation rejects a built task of a language the grader cannot grade as ``ungradable_language``
    (validate/run.py); JavaScript's runners are graded now (tests/test_grade_js.py)."""
    assert get_profile("python").gradable and get_profile("javascript").gradable
    assert get_profile("python").ungradable_reason("pytest") is None


@pytest.mark.parametrize("runner", ["karma", None])
def test_a_javascript_task_without_a_known_runner_is_not_graded(runner):
    """No plan runs its tests and no canary style checks its report: validation rejects the task as
    ungradable_language with this reason rather than publish a reward a policy can forge."""
    reason = get_profile("javascript").ungradable_reason(runner)
    assert reason and ("no test runner" in reason if runner is None else "karma" in reason)


@pytest.mark.parametrize("runner", ["mocha", "jest", "jasmine", "vitest", "ava", "tape", "node"])
def test_every_javascript_runner_with_canaries_is_graded(runner):
    assert get_profile("javascript").ungradable_reason(runner) is None


# --- what the stages ask of a task's tests ---------------------------------------------------


def test_only_python_runs_its_tests_as_pytest():
    assert get_profile("python").runs_tests_as_pytest() and not get_profile("javascript").runs_tests_as_pytest()
    assert get_profile("python").test_runner().plan is None, "pytest's run is the grader's own"


def test_the_agents_visible_tests_run_with_the_tasks_runner():
    from repo2env.models import EnvSpec

    assert get_profile("python").visible_tests_command() == "python -m pytest -q -x -p no:cacheprovider"
    javascript = get_profile("javascript")
    spec = EnvSpec(status="env_ok", base="node18", node="18", test_runner="mocha")
    command = javascript.visible_tests_command(spec)
    assert command.startswith("cd /testbed && export PATH=/testbed/node_modules/.bin:") and command.endswith(" && mocha --bail")
    workspace = javascript.visible_tests_command(spec.model_copy(update={"test_runner": "jest", "package_dir": "packages/core"}))
    assert workspace.startswith("cd /testbed/packages/core && ") and workspace.endswith(" jest --ci --bail --coverage=false "
                                                                                          "--watchAll=false --cacheDirectory=/tmp/.repo2env-jest-cache")
    assert "pytest" not in command + workspace
    with pytest.raises(ValueError, match="EnvSpec.test_runner"):
        javascript.visible_tests_command(None)


@pytest.mark.parametrize("runner", ["mocha", "jest", "vitest", "ava", "tape", "node"])
def test_javascript_facts_join_what_they_split_and_name_their_canary_style(runner):
    from repo2env.models import EnvSpec

    facts = get_profile("javascript").test_runner(EnvSpec(status="env_ok", base="node18", node="18", test_runner=runner))
    made = facts.join_id("test/a.test.js", ["pad", "keeps a > b"])
    assert facts.split_id(made) == ("test/a.test.js", ("pad", "keeps a > b"))
    assert facts.canary_style == "describe-it"
    # vitest's, ava's, tape's and node's test files import their test function: the canaries read
    # which names each file has; mocha's and jest's are globals.
    assert (facts.test_callees is not None) == (runner not in ("mocha", "jest"))
    assert facts.reported is not None and facts.read is not None
    assert get_profile("python").test_runner().canary_style == "python"
