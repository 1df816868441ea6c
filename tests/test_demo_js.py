"""The embedded JavaScript demo (fmtkit): deterministic, shaped like a GitHub history, its ground truth true.

The ground-truth checks run fmtkit's own mocha suite in a container of the Node 18 base image, in
exported copies of the demo's commits (never in the built repository itself), through a reporter
of their own so that they do not depend on the runner adapter they are compared with. fmtkit's
dependencies (mocha, tsx) are installed once per session with ``npm ci`` from the committed lock
file and shared by every copy, since no commit of the history changes them (a test below proves it).
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import os
import re
import subprocess
import tarfile
import textwrap
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

import git
import pytest
from fake_github import FakeGitHub  # noqa: I001 (tests/ is on sys.path)

from repo2env.demo import (
    DEMO_LANGUAGES,
    DEMO_REPO,
    JS_DEMO_PULLS,
    JS_DEMO_REPO,
    DemoPull,
    DemoRepo,
    build_demo,
    demo_history,
)
from repo2env.errors import InputError

PULLS = {pull.number: pull for pull in JS_DEMO_PULLS}
MERGED = [pull for pull in JS_DEMO_PULLS if pull.merge_style != "unmerged"]
KEPT = [pull for pull in JS_DEMO_PULLS if pull.expected_bucket == "kept"]
TESTED = [pull for pull in JS_DEMO_PULLS if pull.fail_to_pass or pull.pass_to_pass]
BUCKETS = {"kept", "no_linked_issue", "no_test_changes", "no_source_change", "not_merged"}
#: V8's --random-seed per run of the flaky check (0 would mean "unseeded").
RANDOM_SEEDS = range(1, 13)
#: What ``npm test`` runs (package.json's test script), for the whole-suite runs.
SUITE_GLOB = "test/**/*.test.{js,mjs,ts}"
#: The tips of ``main``, pinned: a change to either demo's history (or to the Python demo's bytes
#: through the shared builder) must be deliberate. Update them when you change a demo on purpose.
PINNED = {
    "python": ("54d9ee0987ab65f6edad5811eb623bd521201110",
               "bf0f06a6066d2557480dcad2f3b15267d12fa7973a2d9fb6462d0844928de2d4"),
    "javascript": ("b6afcab1b080a31b63e4ed84398d593e2aca3dcb",
                   "687593d11232f9853177634a60d8845eae3d0b57389966031a964aa6f944ec33"),
}
_ID = re.compile(r"test/[\w-]+\.test\.(?:js|mjs|ts)::[^>:]+(?: > [^>]+)+")
_JUNK = re.compile(r"(^|/)(node_modules|coverage|\.nyc_output|\.DS_Store)(/|$)|\.(orig|rej|log|swp)$|~$")

#: One JSON line per test outcome, in fmtkit's id format. Mocha's own json reporter joins the titles
#: with spaces (ambiguous), so the checks read titlePath() through this reporter instead.
REPORTER = textwrap.dedent("""
    "use strict";
    const fs = require("node:fs");
    const path = require("node:path");

    module.exports = class JsonLines {
      constructor(runner) {
        const write = (test, outcome) => {
          const file = path.relative(process.cwd(), test.file || "").split(path.sep).join("/");
          const line = { id: `${file}::${test.titlePath().join(" > ")}`, outcome, hook: test.type === "hook" };
          fs.appendFileSync(process.env.REPORT_PATH, JSON.stringify(line) + "\\n");
        };
        runner.on("pass", (test) => write(test, "passed"));
        runner.on("fail", (test) => write(test, "failed"));
        runner.on("pending", (test) => write(test, "pending"));
      }
    };
""")

#: The bodies a stub of a changed function gets (validation's stub styles, in JavaScript).
STUB_BODIES = {
    "undefined": "return undefined;",
    "array": "return [];",
    "zero": "return 0;",
    "string": 'return "";',
    "throw": 'throw new Error("not implemented");',
}
#: The exported functions each tested PR's fix changes, by file (an internal helper such as ordinal's
#: suffixOf goes with the exported function that calls it).
CHANGED_FUNCTIONS = {
    2: {"lib/ordinal.js": ("ordinal",)},
    4: {"lib/list.js": ("formatList",)},
    6: {"lib/bytes.js": ("formatBytes",)},
    8: {"lib/duration.js": ("parseDuration",)},
    10: {"lib/plural.js": ("pluralize",)},
    16: {"lib/random.js": ("randomString",)},
    18: {"lib/duration.js": ("formatDuration",)},
    19: {"lib/bytes.js": ("parseBytes",)},
}


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def _is_ancestor(repo: Path, older: str, newer: str) -> bool:
    done = subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", older, newer], check=False)
    return done.returncode == 0


def _iso(git_iso: str) -> str:
    return datetime.fromisoformat(git_iso).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _file_kind(path: str) -> str:
    """The split the JavaScript profile makes: test files, aux files (changelog, readme, docs), source."""
    parts = PurePosixPath(path).parts
    name = parts[-1]
    if {"test", "tests", "__tests__"} & set(parts[:-1]) or re.search(r"\.(test|spec)\.[cm]?[jt]sx?$", name):
        return "test"
    if parts[0] == "docs" or name.upper().startswith(("CHANGELOG", "README")):
        return "aux"
    return "source"


def _landings(repo: Path) -> dict[int, str]:
    landed: dict[int, str] = {}
    for line in _git(repo, "log", "--first-parent", "--format=%H %s", "main").splitlines():
        sha, subject = line.split(" ", 1)
        found = re.fullmatch(r"Merge pull request #(\d+) from \S+", subject) or re.search(r" \(#(\d+)\)$", subject)
        if found:
            landed[int(found.group(1))] = sha
    return landed


class _PullCommits:
    """The commits that matter for one merged PR: ``base``, ``head`` (of its diff) and ``landing``."""

    def __init__(self, repo: Path, pull: DemoPull) -> None:
        self.landing = _landings(repo)[pull.number]
        first_parent = _git(repo, "rev-parse", f"{self.landing}^1")
        if pull.merge_style == "merge":
            self.head = _git(repo, "rev-parse", f"refs/pull/{pull.number}/head")
            self.base = _git(repo, "merge-base", self.head, first_parent)
        else:
            self.head = self.landing
            self.base = first_parent
        self.changes = dict(
            (path, status)
            for status, path in (
                line.split("\t", 1) for line in _git(repo, "diff", "--name-status", self.base, self.head).splitlines()
            )
        )

    def paths(self, kind: str) -> list[str]:
        return sorted(path for path in self.changes if _file_kind(path) == kind)

    def test_files(self) -> list[str]:
        """The test files (with tests in them) that the PR adds or changes."""
        return [path for path in self.paths("test") if re.search(r"\.test\.[cm]?[jt]s$", path)
                and self.changes[path] != "D"]


class _NodeSnapshots:
    """Exports fmtkit commits into one folder shared with a Node.js container and runs mocha there."""

    def __init__(self, repo: Path, root: Path, container) -> None:
        self._repo = repo
        self._root = root
        self._container = container
        self._counter = itertools.count()
        self.reporter = root / "reporter.js"
        self.reporter.write_text(REPORTER)
        self.node_modules = root / "deps" / "node_modules"

    def exec(self, command: str, *, workdir: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
        result = self._container.exec_run(["sh", "-c", command], workdir=str(workdir), environment=env or {})
        return result.exit_code, result.output.decode(errors="replace")

    def install(self, commit: str) -> None:
        """``npm ci`` from ``commit``'s package.json and lock file, once, into the shared folder."""
        deps = self.node_modules.parent
        deps.mkdir()
        for name in ("package.json", "package-lock.json"):
            (deps / name).write_text(_git(self._repo, "show", f"{commit}:{name}"))
        code, output = self.exec("npm ci --no-audit --no-fund --loglevel=error", workdir=deps)
        assert code == 0, f"npm ci failed:\n{output[-3000:]}"

    def export(self, commit: str, *, overlay_from: str | None = None, overlay: Iterable[str] = (),
               patch: str = "", appended: dict[str, str] | None = None) -> Path:
        """``commit``'s tree, with ``overlay`` paths from ``overlay_from``, ``patch`` applied and text
        ``appended`` to files; node_modules links to the shared install."""
        directory = self._root / f"snapshot-{next(self._counter)}"
        archive = subprocess.run(["git", "-C", str(self._repo), "archive", "--format=tar", commit],
                                 capture_output=True, check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(directory, filter="data")
        for path in overlay:
            blob = subprocess.run(["git", "-C", str(self._repo), "show", f"{overlay_from}:{path}"],
                                  capture_output=True, check=False)
            target = directory / path
            if blob.returncode == 0:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(blob.stdout)
            else:
                target.unlink(missing_ok=True)
        if patch:
            env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(directory.parent)}
            applied = subprocess.run(["git", "apply", "-"], input=patch, text=True, cwd=directory, env=env,
                                     capture_output=True)
            assert applied.returncode == 0, f"git apply failed at {commit}: {applied.stderr}"
        for path, text in (appended or {}).items():
            with (directory / path).open("a", encoding="utf-8") as handle:
                handle.write(text)
        (directory / "node_modules").symlink_to(self.node_modules)
        return directory

    def _mocha(self, directory: Path, targets: list[str], seed: int | None) -> tuple[int, list[dict], str]:
        report = directory / f"report-{next(self._counter)}.jsonl"
        # _mocha runs in the node process it is given; mocha's own wrapper would start a second one
        # to pass on a V8 flag.
        seeded = f"--random-seed={seed} " if seed is not None else ""
        quoted = " ".join(f"'{target}'" for target in targets)
        code, output = self.exec(f"timeout 120 node {seeded}node_modules/.bin/_mocha --reporter {self.reporter} {quoted}",
                                 workdir=directory, env={"REPORT_PATH": str(report)})
        lines = [json.loads(line) for line in report.read_text().splitlines()] if report.exists() else []
        return code, lines, output

    def run_suite(self, directory: Path, *, seed: int | None = None) -> dict[str, str]:
        """The whole suite in one mocha process; every file must load. Test id -> outcome."""
        code, lines, output = self._mocha(directory, [SUITE_GLOB], seed)
        assert lines and not any(line["hook"] for line in lines), f"mocha could not run in {directory}:\n{output}"
        return {line["id"]: line["outcome"] for line in lines}

    def run_files(self, directory: Path, files: Iterable[str], *, seed: int | None = None) -> dict[str, str]:
        """``files`` in one mocha process; when one of them does not load (mocha then stops the whole
        run), each file in a process of its own, and the one that does not load gets the id ``<path>``
        and the outcome ``failed``."""
        files = list(files)
        code, lines, output = self._mocha(directory, files, seed)
        if {line["id"].split("::")[0] for line in lines} == set(files):
            return {line["id"]: line["outcome"] for line in lines}
        outcomes: dict[str, str] = {}
        for file in files:
            code, lines, output = self._mocha(directory, [file], seed)
            if not lines:
                assert code != 0 and "Error" in output, f"{file} ran no test in {directory}:\n{output}"
                outcomes[file] = "failed"
            outcomes.update((line["id"], line["outcome"]) for line in lines)
        return outcomes


@pytest.fixture(scope="module")
def node(docker_client, js_demo_repo: DemoRepo, tmp_path_factory: pytest.TempPathFactory):
    """fmtkit's dependencies installed once in a Node.js container; a :class:`_NodeSnapshots`."""
    from repo2env.runtime.backends.docker import DockerBackend
    from repo2env.runtime.node_bootstrap import ensure_node_base_image

    # .nvmrc says 18: Debian bookworm's nodejs on the Python 3.11 base image (built once per engine).
    image = ensure_node_base_image(DockerBackend(docker_client), "18")
    root = tmp_path_factory.mktemp("js-demo-snapshots")
    container = docker_client.containers.run(
        image.tag, ["sleep", "infinity"], detach=True, user="root", working_dir=str(root),
        volumes={str(root): {"bind": str(root), "mode": "rw"}}, labels={"repo2env.test": "js-demo"},
    )
    try:
        snapshots = _NodeSnapshots(js_demo_repo.path, root, container)
        snapshots.install(_git(js_demo_repo.path, "rev-list", "--max-parents=0", "main"))
        yield snapshots
    finally:
        container.remove(force=True)


@pytest.fixture(scope="module")
def issues_doc(js_demo_repo: DemoRepo) -> dict:
    return json.loads(js_demo_repo.issues_path.read_text(encoding="utf-8"))


# --- the build ------------------------------------------------------------------------------------


def test_two_builds_give_identical_repositories(js_demo_repo: DemoRepo, tmp_path: Path):
    started = time.perf_counter()
    second = build_demo(tmp_path, "javascript")
    elapsed = time.perf_counter() - started
    assert elapsed < 10, f"build_demo took {elapsed:.1f} s"
    assert _git(second.path, "for-each-ref") == _git(js_demo_repo.path, "for-each-ref")
    assert second.issues_path.read_bytes() == js_demo_repo.issues_path.read_bytes()
    assert second.repo == JS_DEMO_REPO and second.language == "javascript"
    assert second.pulls == JS_DEMO_PULLS == js_demo_repo.pulls


@pytest.mark.parametrize("language", DEMO_LANGUAGES)
def test_each_demo_is_pinned(language: str, tmp_path: Path):
    built = build_demo(tmp_path, language)
    tip, issues_sha256 = PINNED[language]
    assert _git(built.path, "rev-parse", "main") == tip
    assert hashlib.sha256(built.issues_path.read_bytes()).hexdigest() == issues_sha256
    assert built.repo == {"python": DEMO_REPO, "javascript": JS_DEMO_REPO}[language]


def test_demos_by_language(tmp_path: Path):
    assert DEMO_LANGUAGES == ("python", "javascript")
    assert build_demo.__defaults__ == ("python",)
    with pytest.raises(InputError, match="no demo repository in 'cobol'"):
        build_demo(tmp_path, "cobol")
    assert not (tmp_path / "repo").exists()
    python, javascript = (demo_history(language) for language in DEMO_LANGUAGES)
    assert (python.language, javascript.language) == DEMO_LANGUAGES
    # Two demos never share a fake GitHub id, so one fake server could hold both.
    assert python.id_offset != javascript.id_offset


def test_demo_init_builds_the_javascript_demo_through_the_cli(tmp_path: Path):
    from click.testing import CliRunner

    from repo2env.cli import cli

    result = CliRunner().invoke(cli, ["demo", "init", str(tmp_path / "demo"), "--language", "javascript"])
    assert result.exit_code == 0, result.output
    assert "repo2env-demo/fmtkit" in result.output and "10 merged PRs" in result.output
    assert _git(tmp_path / "demo" / "repo", "rev-parse", "main") == PINNED["javascript"][0]
    assert json.loads((tmp_path / "demo" / "issues.json").read_text())["repository"] == JS_DEMO_REPO
    choices = next(param for param in cli.commands["demo"].commands["init"].params if param.name == "language")
    assert tuple(choices.type.choices) == DEMO_LANGUAGES


def test_builds_from_an_installed_wheel(installed_wheel, tmp_path: Path):
    """The lock file is package data: an installed repo2env builds the same fmtkit."""
    import sys

    names, unpacked = installed_wheel
    assert "repo2env/demo/fmtkit/package-lock.json" in names
    probe = ("import sys, repo2env; from repo2env.demo import build_demo; "
             "print(repo2env.__file__); print(build_demo(sys.argv[1], 'javascript').path)")
    result = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "demo")], capture_output=True, text=True,
                            cwd=tmp_path, env={"PYTHONPATH": str(unpacked), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert result.returncode == 0, result.stderr
    where, repo = result.stdout.split()
    assert where.startswith(str(unpacked))
    assert _git(Path(repo), "rev-parse", "main") == PINNED["javascript"][0]


@pytest.mark.docker
def test_demo_run_keeps_each_demo_in_its_own_folder(docker_runtime, tmp_path: Path):
    from repo2env.pipeline.demo import run_demo

    build_demo(tmp_path / "source", "javascript")
    with pytest.raises(InputError, match="holds the demo of repo2env-demo/fmtkit, not the python demo"):
        run_demo(tmp_path, backend=docker_runtime)
    assert not (tmp_path / "tasks").exists(), "nothing was mined into the other demo's folder"


def test_repository_is_checked_out_clean_on_main(js_demo_repo: DemoRepo):
    repo = js_demo_repo.path
    assert _git(repo, "symbolic-ref", "HEAD") == "refs/heads/main"
    assert _git(repo, "status", "--porcelain", "--untracked-files=all", "--ignored") == ""
    assert _git(repo, "for-each-ref", "--format=%(refname)", "refs/heads") == "refs/heads/main"
    pull_refs = set(_git(repo, "for-each-ref", "--format=%(refname)", "refs/pull").splitlines())
    assert pull_refs == {f"refs/pull/{pull.number}/head" for pull in JS_DEMO_PULLS}
    paths = {path for ref in ["main", *pull_refs] for path in _git(repo, "ls-tree", "-r", "--name-only", ref).splitlines()}
    assert not [path for path in paths if _JUNK.search(path)]


def test_library_layout(js_demo_repo: DemoRepo):
    repo = js_demo_repo.path
    files = set(_git(repo, "ls-tree", "-r", "--name-only", "main").splitlines())
    assert {"README.md", "CHANGELOG.md", "docs/api.md", ".mocharc.json", ".nvmrc", "package.json",
            "package-lock.json", "index.mjs", "index.d.ts", "lib/index.js", "test/fixtures.js"} <= files
    assert len([path for path in files if path.startswith("lib/")]) >= 7
    assert {"js", "mjs", "ts"} <= {path.rsplit(".", 1)[1] for path in files if path.startswith("test/")}
    package = json.loads((repo / "package.json").read_text())
    assert package["name"] == "fmtkit" and package["engines"] == {"node": ">=18"}
    assert package["scripts"]["test"] == f"mocha '{SUITE_GLOB}'"
    assert set(package["devDependencies"]) == {"mocha", "tsx"} and "dependencies" not in package
    assert package["exports"]["."] == {"types": "./index.d.ts", "import": "./index.mjs", "require": "./lib/index.js"}
    assert json.loads((repo / ".mocharc.json").read_text())["require"] == ["tsx/cjs"]
    lock = json.loads((repo / "package-lock.json").read_text())
    assert lock["lockfileVersion"] == 3
    root = lock["packages"][""]
    assert root["devDependencies"] == package["devDependencies"] and root["version"] == package["version"]
    installed = {path.removeprefix("node_modules/"): entry for path, entry in lock["packages"].items() if path}
    assert installed["mocha"]["version"] == "10.3.0" and installed["tsx"]["version"] == "4.7.1"
    # Pinned by integrity hashes, and naming no registry: npm ci installs from whichever is configured.
    assert all(entry["integrity"].startswith("sha512-") and "resolved" not in entry for entry in installed.values())


def test_versions_bump_together(js_demo_repo: DemoRepo):
    repo = js_demo_repo.path
    seen = []
    for commit in _git(repo, "rev-list", "--first-parent", "--reverse", "main").splitlines():
        version = json.loads(_git(repo, "show", f"{commit}:package.json"))["version"]
        lock = json.loads(_git(repo, "show", f"{commit}:package-lock.json"))
        assert lock["version"] == lock["packages"][""]["version"] == version, commit
        if not seen or seen[-1] != version:
            seen.append(version)
    assert seen == ["0.1.0", "0.2.0", "0.3.0"]


def test_dependencies_never_change(js_demo_repo: DemoRepo):
    """Why one ``npm ci`` serves every commit of the ground-truth checks below."""
    repo = js_demo_repo.path
    refs = _git(repo, "rev-list", "--all").splitlines()
    installs = set()
    for ref in refs:
        package = json.loads(_git(repo, "show", f"{ref}:package.json"))
        lock = json.loads(_git(repo, "show", f"{ref}:package-lock.json"))
        packages = {path: entry for path, entry in lock["packages"].items() if path}
        installs.add(json.dumps([package["devDependencies"], package["engines"], packages], sort_keys=True))
    assert len(installs) == 1


def test_history_dates_and_authors(js_demo_repo: DemoRepo):
    repo = js_demo_repo.path
    log = _git(repo, "log", "--first-parent", "--reverse", "--format=%ct %cI %an", "main").splitlines()
    stamps = [int(line.split()[0]) for line in log]
    assert stamps == sorted(stamps)
    assert _iso(log[0].split()[1]) == "2024-03-04T09:00:00Z"
    authors = set(_git(repo, "log", "--all", "--format=%an <%ae>").splitlines())
    assert {"Margaret Hamilton <margaret@example.com>", "Barbara Liskov <barbara@example.com>"} <= authors


# --- how PRs land -----------------------------------------------------------------------------------


def test_pull_requests_land_as_on_github(js_demo_repo: DemoRepo):
    repo = js_demo_repo.path
    landings = _landings(repo)
    assert set(landings) == {pull.number for pull in MERGED}
    assert len(MERGED) >= 8
    assert {pull.merge_style for pull in MERGED} == {"merge", "squash"}
    moved_on = []
    for pull in MERGED:
        landing = landings[pull.number]
        head = _git(repo, "rev-parse", f"refs/pull/{pull.number}/head")
        parents = _git(repo, "rev-parse", f"{landing}^@").splitlines()
        message = _git(repo, "log", "-1", "--format=%B", landing)
        assert _git(repo, "log", "-1", "--format=%cn <%ce>", landing) == "GitHub <noreply@github.com>"
        branch_subjects = _git(repo, "log", "--format=%s", f"{parents[0]}..{head}").splitlines()
        assert 1 <= len(branch_subjects) <= 3
        if pull.merge_style == "merge":
            assert parents[1] == head
            assert re.fullmatch(rf"Merge pull request #{pull.number} from [\w-]+/[\w-]+\n\n{re.escape(pull.title)}",
                                message)
            if _git(repo, "merge-base", head, parents[0]) != parents[0]:
                moved_on.append(pull.number)
        else:
            assert len(parents) == 1
            subject, _, body = message.partition("\n\n")
            assert subject == f"{pull.title} (#{pull.number})"
            assert all(f"* {branch_subject}" in body for branch_subject in branch_subjects)
    assert moved_on, "some PR must branch off an older main than the one it merges into"
    for pull in JS_DEMO_PULLS:
        if pull.merge_style == "unmerged":
            assert not _is_ancestor(repo, f"refs/pull/{pull.number}/head", "main")


def test_ground_truth_is_well_formed():
    assert len(PULLS) == len(JS_DEMO_PULLS)
    assert {pull.expected_bucket for pull in JS_DEMO_PULLS} == BUCKETS
    for pull in JS_DEMO_PULLS:
        assert (pull.merge_style == "unmerged") == (pull.expected_bucket == "not_merged")
        if pull.merge_style != "unmerged":
            assert (pull.expected_bucket == "no_linked_issue") == (not pull.linked_issues), pull.number
        ids = set(pull.fail_to_pass) | set(pull.pass_to_pass) | set(pull.flaky)
        assert len(ids) == len(pull.fail_to_pass) + len(pull.pass_to_pass) + len(pull.flaky), pull.number
        assert all(_ID.fullmatch(test_id) for test_id in ids), sorted(ids)
        for fix in pull.partial_fixes:
            assert set(fix.passes) < set(pull.fail_to_pass) and fix.passes
            touched = re.findall(r"^diff --git a/(\S+) b/", fix.patch, re.MULTILINE)
            assert touched and all(_file_kind(path) == "source" for path in touched)
    assert sum(1 for pull in JS_DEMO_PULLS if pull.leaks_fix) == 1
    reasons = {pull.number: pull.expected_reasons for pull in KEPT}
    assert set(reasons.values()) == {(), ("no_f2p",), ("stub_passes",)}, reasons
    assert [pull.number for pull in KEPT if not pull.fail_to_pass] == [18]


def test_required_scenarios_are_present(js_demo_repo: DemoRepo):
    repo = js_demo_repo.path
    commits = {pull.number: _PullCommits(repo, pull) for pull in MERGED}
    for pull in MERGED:
        kinds = {_file_kind(path) for path in commits[pull.number].changes}
        if pull.expected_bucket in ("kept", "no_linked_issue"):
            assert {"source", "test"} <= kinds, pull.number
        elif pull.expected_bucket == "no_test_changes":
            assert "source" in kinds and "test" not in kinds
        elif pull.expected_bucket == "no_source_change":
            assert kinds == {"aux"}

    def some(predicate) -> bool:
        return any(predicate(pull, commits[pull.number]) for pull in KEPT)

    assert some(lambda p, c: p.merge_style == "merge" and "CHANGELOG.md" in c.changes and len(p.fail_to_pass) >= 3
                and p.partial_fixes)
    assert some(lambda p, c: p.merge_style == "squash" and len(p.fail_to_pass) >= 3 and p.partial_fixes)
    # A new test file whose module does not exist before the fix (it fails to load there).
    assert some(lambda p, c: any(s == "A" and f.endswith(".test.js") for f, s in c.changes.items()))
    assert some(lambda p, c: c.changes.get("test/fixtures.js") == "M")
    assert some(lambda p, c: c.changes.get("test/duration.test.ts") == "M" and p.fail_to_pass)
    assert some(lambda p, c: c.changes.get("test/esm.test.mjs") == "M" and p.fail_to_pass)
    assert some(lambda p, c: p.flaky and len(p.fail_to_pass) >= 2)
    # A new export: the CommonJS index, the ES module entry and the typings change together.
    assert some(lambda p, c: {"lib/index.js", "index.mjs", "index.d.ts"} <= set(c.changes))


@pytest.mark.parametrize("pull", [pull for pull in JS_DEMO_PULLS if pull.partial_fixes], ids=lambda p: f"pr{p.number}")
def test_gold_fix_has_a_hunk_per_partial_fix(pull: DemoPull, js_demo_repo: DemoRepo):
    """Validation's partial variants are subsets of the gold patch's hunks: each partial fix is one."""
    commits = _PullCommits(js_demo_repo.path, pull)
    gold = _git(js_demo_repo.path, "diff", commits.base, commits.head, "--", *commits.paths("source"))
    hunks = re.findall(r"^@@ .*$", gold, re.MULTILINE)
    assert len(hunks) == len(pull.partial_fixes)
    for fix in pull.partial_fixes:
        added = {line for line in fix.patch.splitlines() if line.startswith("+") and not line.startswith("+++")}
        assert added and added <= set(gold.splitlines())


def test_the_javascript_building_blocks_read_fmtkit(js_demo_repo: DemoRepo):
    """At every PR's base commit: npm with the lock file as pin, Node 18 (.nvmrc), mocha with tsx for
    the TypeScript test, .mocharc.json among the runner's configuration, and ids that split back."""
    from repo2env.languages.javascript.environment import infer_environment, typescript_support
    from repo2env.languages.javascript.project import ProjectFiles
    from repo2env.languages.javascript.runners import config_files, detect_runner
    from repo2env.languages.javascript.test_ids import split_test_id, test_id

    repo = js_demo_repo.path
    for pull in MERGED:
        base = _PullCommits(repo, pull).base
        paths = _git(repo, "ls-tree", "-r", "--name-only", base).splitlines()
        files = ProjectFiles.of(lambda path, base=base: _show(repo, base, path), paths)
        date = datetime.fromisoformat(_git(repo, "log", "-1", "--format=%cI", base))
        environment = infer_environment(files, date)
        assert environment.node == "18", environment.node_reason
        assert environment.package_manager.name == "npm" and environment.pin.kind == "lockfile"
        assert environment.pin.detail == "package-lock.json"
        assert environment.install == ("npm ci --no-audit --no-fund",)
        runner = detect_runner(files)
        assert runner is not None and runner.runner == "mocha", runner
        assert typescript_support(files, "mocha").transform == "tsx"
        assert ".mocharc.json" in config_files("mocha", files)
    for pull in JS_DEMO_PULLS:
        for one in pull.fail_to_pass + pull.pass_to_pass + pull.flaky:
            file, titles = split_test_id(one)
            assert test_id(file, titles) == one and len(titles) >= 2


def _show(repo: Path, commit: str, path: str) -> str | None:
    done = subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{path}"], capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def _mines_javascript() -> bool:
    from repo2env.models import Task

    return "language" in Task.model_fields


@pytest.mark.skipif(not _mines_javascript(), reason="mining has no JavaScript profile yet (issue 22)")
def test_mining_puts_every_pr_in_its_declared_bucket(js_demo_repo: DemoRepo, tmp_path: Path):
    from repo2env.jsonl import read_tasks
    from repo2env.mine.git import GitSource
    from repo2env.mine.miner import mine

    result = mine(GitSource(js_demo_repo.path, issues_path=js_demo_repo.issues_path), tmp_path)
    tasks = {task.pull_number: task for task in read_tasks(result.tasks_path)}
    rejected = {rejection.pull_number: rejection.reason for rejection in result.funnel.rejections}
    assert {number: rejected.get(number, "kept") for number in PULLS} == {
        pull.number: pull.expected_bucket for pull in JS_DEMO_PULLS}
    for pull in KEPT:
        task = tasks[pull.number]
        commits = _PullCommits(js_demo_repo.path, pull)
        assert task.instance_id == f"repo2env-demo__fmtkit-{pull.number}" and task.language == "javascript"
        assert tuple(task.issue_numbers) == pull.linked_issues and task.base_commit == commits.base
        assert task.version in {"0.1", "0.2", "0.3"}
        for patch, kind in ((task.patch, "source"), (task.test_patch, "test"), (task.aux_patch, "aux")):
            paths = re.findall(r"^diff --git a/\S+ b/(\S+)$", patch, re.MULTILINE)
            assert sorted(paths) == commits.paths(kind), (pull.number, kind)
    (leaking,) = [tasks[pull.number] for pull in KEPT if pull.leaks_fix]
    assert leaking.leak_score >= 0.5 and "/commit/" not in leaking.problem_statement
    added = [line[1:].strip() for line in leaking.patch.splitlines()
             if line.startswith("+") and not line.startswith("+++") and len(line.strip()) > 12]
    assert added and not [line for line in added if line in leaking.problem_statement]
    assert all(tasks[pull.number].leak_score < 0.5 for pull in KEPT if not pull.leaks_fix)


# --- issues.json ------------------------------------------------------------------------------------


def test_issues_json_has_github_shapes(issues_doc: dict, js_demo_repo: DemoRepo, tmp_path: Path):
    assert set(issues_doc) == {"repository", "issues", "pulls", "comments"}
    assert issues_doc["repository"] == JS_DEMO_REPO
    text = js_demo_repo.issues_path.read_text()
    assert "<head-sha-of-pull-" not in text and text.startswith('{\n  "comments"')
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", value)
               for value in re.findall(r'"(?:created|updated|closed|merged)_at": "([^"]*)"', text))
    numbers = sorted(issue["number"] for issue in issues_doc["issues"])
    assert numbers == list(range(1, len(numbers) + 1)), "issues and PRs share one sequence"
    by_number = sorted(issues_doc["issues"], key=lambda issue: issue["number"])
    assert [issue["created_at"] for issue in by_number] == sorted(issue["created_at"] for issue in by_number)
    as_pulls = {issue["number"] for issue in issues_doc["issues"] if "pull_request" in issue}
    assert as_pulls == {pull["number"] for pull in issues_doc["pulls"]} == set(PULLS)
    assert all(issue["node_id"].startswith("I_kwDOfmtkit") for issue in issues_doc["issues"])
    for number, count in {issue["number"]: issue["comments"] for issue in issues_doc["issues"]}.items():
        assert count == sum(comment["issue_url"].endswith(f"/issues/{number}") for comment in issues_doc["comments"])
    # Its ids are its own: none is one of textkit's, whose issues.json has the same shape.
    python = json.loads(build_demo(tmp_path).issues_path.read_text())
    for key in ("issues", "pulls", "comments"):
        assert not {item["id"] for item in python[key]} & {item["id"] for item in issues_doc[key]}, key
    assert python["pulls"][0]["base"]["repo"]["id"] != issues_doc["pulls"][0]["base"]["repo"]["id"]


def test_pulls_in_issues_json_match_git(issues_doc: dict, js_demo_repo: DemoRepo):
    repo = js_demo_repo.path
    landings = _landings(repo)
    for pull_object in issues_doc["pulls"]:
        number = pull_object["number"]
        pull = PULLS[number]
        head = _git(repo, "rev-parse", f"refs/pull/{number}/head")
        assert pull_object["head"]["sha"] == head
        assert pull_object["base"]["ref"] == "main" and _is_ancestor(repo, pull_object["base"]["sha"], head)
        assert pull_object["title"] == pull.title and pull_object["state"] == "closed"
        if pull.merge_style == "unmerged":
            assert pull_object["merged_at"] is None and pull_object["merge_commit_sha"] is None
        else:
            assert pull_object["merge_commit_sha"] == landings[number]
            assert pull_object["merged_at"] == _iso(_git(repo, "log", "-1", "--format=%cI", landings[number]))


def test_linked_issues_and_closing_keywords(issues_doc: dict):
    issues = {issue["number"]: issue for issue in issues_doc["issues"]}
    pulls = {pull["number"]: pull for pull in issues_doc["pulls"]}
    for pull in JS_DEMO_PULLS:
        for number in pull.linked_issues:
            issue = issues[number]
            assert "pull_request" not in issue and issue["created_at"] < pulls[pull.number]["created_at"]
            assert issue["state"] == "closed" and issue["closed_at"] == pulls[pull.number]["merged_at"]
    bodies = " ".join(pull["body"] for pull in issues_doc["pulls"])
    for keyword in (r"\bFixes #\d+", r"\bcloses #\d+", r"\bResolved #\d+", r"\bResolves #\d+",
                    rf"\bfix {JS_DEMO_REPO}#\d+", rf"\bCloses https://github\.com/{JS_DEMO_REPO}/issues/\d+"):
        assert re.search(keyword, bodies), keyword
    # "Fixes #N" where #N is a PR links nothing; neither do mentions without a keyword.
    pull_targets = [(number, int(target)) for number, pull in pulls.items()
                    for target in re.findall(r"\bFixes #(\d+)", pull["body"]) if "pull_request" in issues[int(target)]]
    assert pull_targets and all(target not in PULLS[number].linked_issues for number, target in pull_targets)
    mentions = [(number, int(target)) for number, pull in pulls.items()
                for target in re.findall(r"\b(?:[Ss]ee|related to) #(\d+)", pull["body"])]
    assert mentions and all(target not in PULLS[number].linked_issues for number, target in mentions)
    assert any(PULLS[number].expected_bucket == "no_linked_issue" for number, _ in mentions)


def test_issue_comments_before_and_after_the_fix(issues_doc: dict, js_demo_repo: DemoRepo):
    repo = js_demo_repo.path
    pulls = {pull["number"]: pull for pull in issues_doc["pulls"]}
    before = after = 0
    for pull in KEPT:
        span = f"{pulls[pull.number]['base']['sha']}..refs/pull/{pull.number}/head"
        first_commit = _iso(_git(repo, "log", "--reverse", "--format=%aI", span).splitlines()[0])
        for number in pull.linked_issues:
            for comment in issues_doc["comments"]:
                if comment["issue_url"].endswith(f"/issues/{number}"):
                    before += comment["created_at"] < first_commit
                    after += comment["created_at"] > first_commit
    assert before >= 2 and after >= 2


def test_the_leaking_issue_contains_the_gold_patch(issues_doc: dict, js_demo_repo: DemoRepo):
    repo = js_demo_repo.path
    issues = {issue["number"]: issue for issue in issues_doc["issues"]}
    (pull,) = [pull for pull in JS_DEMO_PULLS if pull.leaks_fix]
    commits = _PullCommits(repo, pull)
    gold = _git(repo, "diff", commits.base, commits.head, "--", *commits.paths("source"))
    added = [line[1:] for line in gold.splitlines() if line.startswith("+") and not line.startswith("+++")]
    (body,) = [issues[number]["body"] for number in pull.linked_issues]
    assert added and "```js" in body and all(line in body for line in added)
    head = _git(repo, "rev-parse", f"refs/pull/{pull.number}/head")
    assert f"https://github.com/{JS_DEMO_REPO}/commit/{head}" in body


def test_served_by_the_fake_github(js_demo_repo: DemoRepo, tmp_path: Path):
    """GitHub-mode mining reads the same PRs and links from the fake GitHub serving this issues.json."""
    from repo2env.mine.github import GitHubSource

    mirror = git.Repo.clone_from(str(js_demo_repo.path), tmp_path / "mirror.git", mirror=True)
    data = json.loads(js_demo_repo.issues_path.read_text())
    merged = {pull.number for pull in MERGED}
    with FakeGitHub(data, tokens={"ghp_jsdemo"}, git_path=Path(mirror.git_dir)) as server:
        source = GitHubSource(JS_DEMO_REPO, workdir=tmp_path / "graphql", token="ghp_jsdemo", api_url=server.api_url,
                              clone_url=mirror.git_dir)
        pulls = list(source.pulls())
        assert source.mode == "graphql" and {pull.number for pull in pulls} == merged
        for pull in pulls:
            assert set(pull.linked_issues or ()) == set(PULLS[pull.number].linked_issues), pull.number
            for number in pull.linked_issues or ():
                linked = source.issue(number)
                assert linked is not None and not linked.is_pull_request
        clone = git.Repo(source.clone_path())
        assert all(clone.commit(f"refs/pull/{pull.number}/head").hexsha == pull.head_sha for pull in pulls)
        server.graphql = False
        rest = GitHubSource(JS_DEMO_REPO, workdir=tmp_path / "rest", token="ghp_jsdemo", api_url=server.api_url)
        rest_pulls = {pull.number: pull for pull in rest.pulls()}
        assert rest.mode == "rest" and set(rest_pulls) == set(PULLS)
        assert {number for number, pull in rest_pulls.items() if pull.merged} == merged


# --- the ground truth holds when fmtkit's tests run ---------------------------------------------------


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("pull", TESTED, ids=lambda pull: f"pr{pull.number}")
def test_fail_to_pass_and_pass_to_pass_hold(pull: DemoPull, js_demo_repo: DemoRepo, node: _NodeSnapshots):
    commits = _PullCommits(js_demo_repo.path, pull)
    targets = commits.test_files()
    before_dir = node.export(commits.base, overlay_from=commits.landing, overlay=commits.paths("test"))
    after_dir = node.export(commits.landing)
    # After the landing the whole suite runs in one process: every file loads and the commit is green.
    with ThreadPoolExecutor(max_workers=2) as pool:
        before_run = pool.submit(node.run_files, before_dir, targets)
        after = node.run_suite(after_dir)
        before = before_run.result()
    collected = {test_id for test_id in after if test_id.split("::")[0] in targets}
    assert collected == set(pull.fail_to_pass) | set(pull.pass_to_pass) | set(pull.flaky)
    assert {test_id: before.get(test_id) for test_id in pull.fail_to_pass if before.get(test_id) == "passed"} == {}
    assert {test_id: before.get(test_id, "missing") for test_id in pull.pass_to_pass
            if before.get(test_id) != "passed"} == {}
    flaky = {test_id for other in JS_DEMO_PULLS for test_id in other.flaky}
    assert {test_id: outcome for test_id, outcome in after.items() if outcome != "passed" and test_id not in flaky} == {}
    if pull.number == 16:
        # Its new test file requires lib/random.js, which only the fix adds: before, it cannot load.
        assert before["test/random.test.js"] == "failed"


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("pull", [pull for pull in JS_DEMO_PULLS if pull.partial_fixes], ids=lambda p: f"pr{p.number}")
def test_partial_fixes_pass_exactly_their_subset(pull: DemoPull, js_demo_repo: DemoRepo, node: _NodeSnapshots):
    commits = _PullCommits(js_demo_repo.path, pull)
    directories = [node.export(commits.base, overlay_from=commits.landing, overlay=commits.paths("test"), patch=fix.patch)
                   for fix in pull.partial_fixes]
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda directory: node.run_files(directory, commits.test_files()), directories))
    for fix, outcomes in zip(pull.partial_fixes, results, strict=True):
        passed = {test_id for test_id, outcome in outcomes.items() if outcome == "passed"}
        assert passed & set(pull.fail_to_pass) == set(fix.passes), fix.name
        assert set(pull.pass_to_pass) <= passed, fix.name


@pytest.mark.docker
@pytest.mark.slow
def test_flaky_test_depends_on_the_random_seed(js_demo_repo: DemoRepo, node: _NodeSnapshots):
    (pull,) = [pull for pull in JS_DEMO_PULLS if pull.flaky]
    directory = node.export(_landings(js_demo_repo.path)[pull.number])
    files = sorted({test_id.split("::")[0] for test_id in pull.flaky})
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(lambda seed: node.run_files(directory, files, seed=seed), RANDOM_SEEDS))
    for test_id in pull.flaky:
        assert {run.get(test_id) for run in runs} == {"passed", "failed"}, test_id
    for test_id in pull.fail_to_pass:
        if test_id.split("::")[0] in files:
            assert {run.get(test_id) for run in runs} == {"passed"}, test_id
    # The same seed gives the same outcome: a seeded rerun is a faithful rerun.
    assert node.run_files(directory, files, seed=RANDOM_SEEDS[0]) == runs[0]


@pytest.mark.docker
@pytest.mark.slow
def test_stubs_earn_reward_where_declared(js_demo_repo: DemoRepo, node: _NodeSnapshots):
    """A stub of the functions a fix changes (each style of STUB_BODIES) passes some FAIL_TO_PASS test
    exactly when the ground truth says ``stub_earns``.

    One suite run per style, at the tip of main with every changed function stubbed at once: each
    PR's FAIL_TO_PASS tests are unchanged there and call only the functions their own fix changed.
    """
    assert {pull.number for pull in TESTED} == set(CHANGED_FUNCTIONS)
    stubbed_names: dict[str, set[str]] = {}
    for changed in CHANGED_FUNCTIONS.values():
        for path, names in changed.items():
            stubbed_names.setdefault(path, set()).update(names)
    directories = {
        style: node.export("main", appended={
            path: "".join(f"\nmodule.exports.{name} = function {name}() {{\n  {body}\n}};\n" for name in sorted(names))
            for path, names in stubbed_names.items()})
        for style, body in STUB_BODIES.items()
    }
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = dict(zip(directories, pool.map(node.run_suite, directories.values()), strict=True))
    earned: dict[int, set[str]] = {}
    for style, outcomes in runs.items():
        for pull in TESTED:
            assert set(pull.fail_to_pass) <= set(outcomes), (style, pull.number)
            if any(outcomes[test_id] == "passed" for test_id in pull.fail_to_pass):
                earned.setdefault(pull.number, set()).add(style)
    assert set(earned) == {pull.number for pull in TESTED if pull.stub_earns}, earned
    assert earned[16] == {"string"}


@pytest.mark.docker
@pytest.mark.slow
def test_other_main_commits_pass_their_own_suite(js_demo_repo: DemoRepo, node: _NodeSnapshots):
    """Every commit on main is green; the landings of TESTED PRs are run by the test above."""
    repo = js_demo_repo.path
    flaky = {test_id for pull in JS_DEMO_PULLS for test_id in pull.flaky}
    checked = {_landings(repo)[pull.number] for pull in TESTED}
    commits = [commit for commit in _git(repo, "rev-list", "--first-parent", "main").splitlines() if commit not in checked]
    directories = [node.export(commit) for commit in commits]
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(node.run_suite, directories))
    for commit, outcomes in zip(commits, runs, strict=True):
        failing = {test_id: outcome for test_id, outcome in outcomes.items()
                   if outcome != "passed" and test_id not in flaky}
        assert outcomes and not failing, commit
    assert len(runs[0]) >= 60
    assert {test_id.split("::")[0].rsplit(".", 1)[1] for test_id in runs[0]} == {"js", "mjs", "ts"}


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("number", [2, 8, 16], ids=lambda number: f"pr{number}")
def test_the_mocha_adapter_reads_the_ground_truth(number: int, js_demo_repo: DemoRepo, node: _NodeSnapshots):
    """The JavaScript runner adapter (plan_run + read_outcomes) runs exactly the ground truth's ids
    and reads them as the ground truth writes them: FAIL_TO_PASS fail before the fix (#16's new test
    file does not even load) and pass after, PASS_TO_PASS pass in both."""
    from repo2env.languages.javascript.runners import plan_run, read_outcomes
    from repo2env.models import TestStatus

    pull = PULLS[number]
    commits = _PullCommits(js_demo_repo.path, pull)
    reporter = node.reporter.parent / "repo2env_mocha_reporter.js"
    if not reporter.exists():
        ours = Path(__file__).parents[1] / "repo2env/languages/javascript"
        reporter.write_text((ours / "mocha_reporter.js").read_text())
        # The module of the live stream the reporter loads from its own folder (a no-op here: no grading).
        (reporter.parent / "outcome_stream.js").write_text((ours / "outcome_stream.js").read_text())
    ids = [*pull.fail_to_pass, *pull.pass_to_pass]
    outcomes = {}
    for state, directory in (("before", node.export(commits.base, overlay_from=commits.landing,
                                                    overlay=commits.paths("test"))),
                             ("after", node.export(commits.landing))):
        plan = plan_run("mocha", ids, str(directory / "reports"), root=str(directory), mocha_reporter=str(reporter))
        code, output = node.exec(plan.command, workdir=directory)
        assert code == 0, output

        def read(path: str) -> str | None:
            return Path(path).read_text() if Path(path).exists() else None

        outcomes[state] = read_outcomes(plan, read, root=str(directory))
    assert set(outcomes["before"]) == set(outcomes["after"]) == set(ids)
    assert {test_id for test_id in pull.fail_to_pass if outcomes["before"][test_id] == TestStatus.PASSED} == set()
    assert {test_id: outcomes["after"][test_id] for test_id in ids if outcomes["after"][test_id] != TestStatus.PASSED} == {}
    assert {test_id: outcomes["before"][test_id] for test_id in pull.pass_to_pass
            if outcomes["before"][test_id] != TestStatus.PASSED} == {}
    if number == 16:
        assert {outcomes["before"][test_id] for test_id in pull.fail_to_pass if test_id.startswith("test/random")} \
            == {TestStatus.ERROR}


@pytest.mark.docker
@pytest.mark.slow
def test_validation_matches_the_ground_truth(validated_js_demo):
    """Mined, built and validated through the JavaScript profile's runner (mocha): every kept PR
    gets the verdict and reasons the ground truth declares, FAIL_TO_PASS and PASS_TO_PASS as
    declared, the flaky test caught by the seeded reruns, the gold patch 1.0 and the empty patch 0."""
    from repo2env.validate.run import read_records

    folder, tasks = validated_js_demo
    records = {int(record.instance_id.rsplit("-", 1)[1]): record for record in read_records(folder / "validation.jsonl")}
    assert set(records) == {pull.number for pull in KEPT}
    assert {number: tuple(record.reasons) for number, record in records.items()} == {
        pull.number: pull.expected_reasons for pull in KEPT}
    for pull in KEPT:
        record, task = records[pull.number], tasks[pull.number]
        assert record.verdict == ("accepted" if not pull.expected_reasons else "rejected"), pull.number
        assert set(task.FAIL_TO_PASS) | set(task.PASS_TO_PASS) <= set(pull.fail_to_pass) | set(pull.pass_to_pass)
        assert set(record.flaky_tests) == set(pull.flaky), pull.number
        if record.verdict == "accepted":
            assert set(task.FAIL_TO_PASS) == set(pull.fail_to_pass) and set(task.PASS_TO_PASS) == set(pull.pass_to_pass)
            rewards = {rollout.kind: [] for rollout in task.validation.rollouts}
            for rollout in task.validation.rollouts:
                rewards[rollout.kind].append(rollout.reward)
            assert set(rewards["gold"]) == {1.0} and set(rewards["null"]) == {0.0}, (pull.number, rewards)
