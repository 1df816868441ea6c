"""The embedded demo repository: deterministic, shaped like a GitHub history, its ground truth true.

The ground-truth checks run textkit's own test suite with the host's Python (textkit has no
dependencies) in exported copies of the demo's commits, never in the built repository itself.
"""

from __future__ import annotations

import ast
import io
import itertools
import json
import os
import re
import subprocess
import sys
import tarfile
import time
import tomllib
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

import pytest

from repo2env.demo import DEMO_PULLS, DEMO_REPO, DemoPull, DemoRepo, build_demo
from repo2env.errors import InputError

PULLS = {pull.number: pull for pull in DEMO_PULLS}
MERGED = [pull for pull in DEMO_PULLS if pull.merge_style != "unmerged"]
KEPT = [pull for pull in DEMO_PULLS if pull.expected_bucket == "kept"]
TESTED = [pull for pull in DEMO_PULLS if pull.fail_to_pass]
BUCKETS = {"kept", "no_linked_issue", "no_test_changes", "no_source_change", "not_merged"}
HASH_SEEDS = range(16)
_SUMMARY_LINE = re.compile(r"^(PASSED|FAILED|ERROR|XPASS|XFAIL) (\S+)", re.MULTILINE)
_JUNK = re.compile(
    r"(\.orig|\.rej|\.pyc|~|\.swp)$|(^|/)(__pycache__|\.pytest_cache|\.DS_Store)(/|$)|\.egg-info"
)


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def _is_ancestor(repo: Path, older: str, newer: str) -> bool:
    done = subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", older, newer], check=False)
    return done.returncode == 0


def _iso(git_iso: str) -> str:
    """git's ``%cI`` (``2024-01-08T09:00:00+00:00``) in GitHub's form (``...Z``)."""
    return datetime.fromisoformat(git_iso).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _file_kind(path: str) -> str:
    """The split rule later stages use: test files, aux files (changelog, readme, docs), source."""
    parts = PurePosixPath(path).parts
    name = parts[-1]
    if {"tests", "test"} & set(parts[:-1]) or re.fullmatch(r"test_.*\.py|.*_test\.py|conftest\.py", name):
        return "test"
    if parts[0] == "docs" or name.upper().startswith(("CHANGELOG", "README")):
        return "aux"
    return "source"


def _landings(repo: Path) -> dict[int, str]:
    """PR number -> the merge or squash commit that landed it on main (first-parent history)."""
    landed: dict[int, str] = {}
    for line in _git(repo, "log", "--first-parent", "--format=%H %s", "main").splitlines():
        sha, subject = line.split(" ", 1)
        found = re.fullmatch(r"Merge pull request #(\d+) from \S+", subject) or re.search(
            r" \(#(\d+)\)$", subject
        )
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
                line.split("\t", 1)
                for line in _git(repo, "diff", "--name-status", self.base, self.head).splitlines()
            )
        )

    def paths(self, kind: str) -> list[str]:
        return sorted(path for path in self.changes if _file_kind(path) == kind)


class _Snapshots:
    """Exports demo commits into fresh directories and runs textkit's tests there."""

    def __init__(self, repo: Path, root: Path) -> None:
        self._repo = repo
        self._root = root
        self._counter = itertools.count()

    def export(
        self, commit: str, *, overlay_from: str | None = None, overlay: Iterable[str] = (), patch: str = ""
    ) -> Path:
        """``commit``'s tree, with ``overlay`` paths taken from ``overlay_from`` and ``patch`` applied."""
        directory = self._root / f"snapshot-{next(self._counter)}"
        archive = subprocess.run(
            ["git", "-C", str(self._repo), "archive", "--format=tar", commit], capture_output=True, check=True
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(directory, filter="data")
        for path in overlay:
            blob = subprocess.run(
                ["git", "-C", str(self._repo), "show", f"{overlay_from}:{path}"],
                capture_output=True,
                check=False,
            )
            target = directory / path
            if blob.returncode == 0:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(blob.stdout)
            else:
                target.unlink(missing_ok=True)
        if patch:
            # The ceiling keeps git from finding an enclosing repository: a plain directory apply.
            env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(directory.parent)}
            applied = subprocess.run(
                ["git", "apply", "-"], input=patch, text=True, cwd=directory, env=env, capture_output=True
            )
            assert applied.returncode == 0, f"git apply failed at {commit}: {applied.stderr}"
        return directory

    def run_tests(self, directory: Path, targets: Iterable[str] = (), seed: int = 0) -> dict[str, str]:
        """Run pytest in ``directory`` on ``targets``; node id -> PASSED/FAILED/ERROR ..."""
        env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
        env.update(
            PYTHONPATH=str(directory / "src"),
            PYTHONHASHSEED=str(seed),
            PYTHONDONTWRITEBYTECODE="1",
            # textkit needs no plugin, and loading the host's (xdist, timeout ...) doubles start-up.
            PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
            COLUMNS="500",
        )
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", "--tb=no"]
        command += ["--continue-on-collection-errors", *targets]
        done = subprocess.run(command, cwd=directory, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode in (0, 1), (
            f"pytest could not run in {directory}:\n{done.stdout}\n{done.stderr}"
        )
        return {
            node_id: outcome for outcome, node_id in _SUMMARY_LINE.findall(done.stdout) if "::" in node_id
        }


@pytest.fixture(scope="module")
def snapshots(demo_repo: DemoRepo, tmp_path_factory: pytest.TempPathFactory) -> _Snapshots:
    return _Snapshots(demo_repo.path, tmp_path_factory.mktemp("demo-snapshots"))


@pytest.fixture(scope="module")
def issues_doc(demo_repo: DemoRepo) -> dict:
    return json.loads(demo_repo.issues_path.read_text(encoding="utf-8"))


# --- the build ------------------------------------------------------------------------------------


def test_two_builds_give_identical_repositories(demo_repo: DemoRepo, tmp_path: Path):
    (tmp_path / "repo").mkdir()  # an empty destination is fine
    started = time.perf_counter()
    second = build_demo(tmp_path)
    elapsed = time.perf_counter() - started
    assert elapsed < 10, f"build_demo took {elapsed:.1f} s"
    for ref in ("main", "refs/pull/10/head"):
        assert _git(second.path, "rev-parse", ref) == _git(demo_repo.path, "rev-parse", ref)
    assert _git(second.path, "for-each-ref") == _git(demo_repo.path, "for-each-ref")
    assert second.issues_path.read_bytes() == demo_repo.issues_path.read_bytes()
    assert second.repo == DEMO_REPO and second.pulls == DEMO_PULLS == demo_repo.pulls


def test_refuses_a_non_empty_destination(tmp_path: Path):
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "notes.txt").write_text("mine\n")
    with pytest.raises(InputError, match="not empty"):
        build_demo(tmp_path)
    assert sorted(p.name for p in (tmp_path / "repo").iterdir()) == ["notes.txt"]


def test_repository_is_checked_out_clean_on_main(demo_repo: DemoRepo):
    repo = demo_repo.path
    assert _git(repo, "symbolic-ref", "HEAD") == "refs/heads/main"
    assert _git(repo, "status", "--porcelain", "--untracked-files=all", "--ignored") == ""
    assert _git(repo, "for-each-ref", "--format=%(refname)", "refs/heads") == "refs/heads/main"
    pull_refs = set(_git(repo, "for-each-ref", "--format=%(refname)", "refs/pull").splitlines())
    assert pull_refs == {f"refs/pull/{pull.number}/head" for pull in DEMO_PULLS}
    paths = {
        path
        for ref in ["main", *pull_refs]
        for path in _git(repo, "ls-tree", "-r", "--name-only", ref).splitlines()
    }
    assert not [path for path in paths if _JUNK.search(path)]


def test_library_layout(demo_repo: DemoRepo):
    repo = demo_repo.path
    files = set(_git(repo, "ls-tree", "-r", "--name-only", "main").splitlines())
    assert {
        "README.md",
        "CHANGELOG.md",
        "docs/usage.md",
        "tests/conftest.py",
        "src/textkit/__init__.py",
    } <= files
    assert len([path for path in files if path.startswith("src/textkit/")]) >= 7
    project = tomllib.loads((repo / "pyproject.toml").read_text())
    assert project["project"]["name"] == "textkit"
    assert project["project"]["requires-python"] == ">=3.9"
    assert project["project"]["optional-dependencies"]["test"] == ["pytest"]
    assert project["project"]["dependencies"] == []
    assert project["tool"]["pytest"]["ini_options"]["testpaths"] == ["tests"]
    # textkit promises Python 3.9: its grammar (no match statements ...) must parse as 3.9's.
    for ref in ["main", *(f"refs/pull/{pull.number}/head" for pull in DEMO_PULLS)]:
        for path in _git(repo, "ls-tree", "-r", "--name-only", ref).splitlines():
            if path.endswith(".py"):
                ast.parse(_git(repo, "show", f"{ref}:{path}"), filename=path, feature_version=(3, 9))


def test_versions_bump_together(demo_repo: DemoRepo):
    repo = demo_repo.path
    seen = []
    for commit in _git(repo, "rev-list", "--first-parent", "--reverse", "main").splitlines():
        project = tomllib.loads(_git(repo, "show", f"{commit}:pyproject.toml"))["project"]["version"]
        package = re.search(r'__version__ = "(.+)"', _git(repo, "show", f"{commit}:src/textkit/__init__.py"))
        assert package and package.group(1) == project, commit
        if not seen or seen[-1] != project:
            seen.append(project)
    assert seen == ["0.1.0", "0.2.0", "0.3.0"]


def test_history_dates_and_authors(demo_repo: DemoRepo):
    repo = demo_repo.path
    log = _git(repo, "log", "--first-parent", "--reverse", "--format=%ct %cI %an", "main").splitlines()
    stamps = [int(line.split()[0]) for line in log]
    assert stamps == sorted(stamps)
    assert _iso(log[0].split()[1]) == "2024-01-08T09:00:00Z"
    authors = set(_git(repo, "log", "--all", "--format=%an <%ae>").splitlines())
    assert {"Ada Lovelace <ada@example.com>", "Grace Hopper <grace@example.com>"} <= authors
    assert "Linus Maintainer <maint@example.com>" in authors


# --- how PRs land -----------------------------------------------------------------------------------


def test_pull_requests_land_as_on_github(demo_repo: DemoRepo):
    repo = demo_repo.path
    landings = _landings(repo)
    assert set(landings) == {pull.number for pull in MERGED}
    assert len(MERGED) >= 10
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
            assert re.fullmatch(
                rf"Merge pull request #{pull.number} from [\w-]+/[\w-]+\n\n{re.escape(pull.title)}", message
            )
            if _git(repo, "merge-base", head, parents[0]) != parents[0]:
                moved_on.append(pull.number)
        else:
            assert len(parents) == 1
            subject, _, body = message.partition("\n\n")
            assert subject == f"{pull.title} (#{pull.number})"
            assert all(f"* {branch_subject}" in body for branch_subject in branch_subjects)
    assert moved_on, "some PR must branch off an older main than the one it merges into"
    for pull in DEMO_PULLS:
        if pull.merge_style == "unmerged":
            assert not _is_ancestor(repo, f"refs/pull/{pull.number}/head", "main")


def test_ground_truth_is_well_formed():
    assert len({pull.number for pull in DEMO_PULLS}) == len(DEMO_PULLS)
    assert {pull.expected_bucket for pull in DEMO_PULLS} == BUCKETS
    for pull in DEMO_PULLS:
        assert (pull.merge_style == "unmerged") == (pull.expected_bucket == "not_merged")
        if pull.merge_style != "unmerged":
            assert (pull.expected_bucket == "no_linked_issue") == (not pull.linked_issues), pull.number
        ids = set(pull.fail_to_pass) | set(pull.pass_to_pass) | set(pull.flaky)
        assert len(ids) == len(pull.fail_to_pass) + len(pull.pass_to_pass) + len(pull.flaky), pull.number
        assert all(re.fullmatch(r"tests/test_\w+\.py::\w+(\[[\w.-]+\])?", node_id) for node_id in ids)
        if pull.expected_bucket == "kept":
            assert pull.fail_to_pass
        for fix in pull.partial_fixes:
            assert set(fix.passes) < set(pull.fail_to_pass) and fix.passes
            touched = re.findall(r"^diff --git a/(\S+) b/", fix.patch, re.MULTILINE)
            assert touched and all(_file_kind(path) == "source" for path in touched)
    assert sum(1 for pull in DEMO_PULLS if pull.leaks_fix) == 1


def test_required_scenarios_are_present(demo_repo: DemoRepo):
    repo = demo_repo.path
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

    assert some(
        lambda p, c: (
            p.merge_style == "merge"
            and "CHANGELOG.md" in c.changes
            and len(p.fail_to_pass) >= 3
            and p.partial_fixes
        )
    )
    assert some(lambda p, c: p.merge_style == "squash" and len(p.fail_to_pass) >= 3 and p.partial_fixes)
    assert some(
        lambda p, c: any(s == "A" and re.fullmatch(r"tests/test_\w+\.py", f) for f, s in c.changes.items())
    )
    assert some(lambda p, c: c.changes.get("tests/conftest.py") == "M")
    assert some(lambda p, c: any(f.startswith("tests/") and not f.endswith(".py") for f in c.changes))
    assert some(lambda p, c: p.flaky and len(p.fail_to_pass) >= 2)


# --- issues.json ------------------------------------------------------------------------------------


def test_issues_json_has_github_shapes(issues_doc: dict, demo_repo: DemoRepo):
    assert set(issues_doc) == {"repository", "issues", "pulls", "comments"}
    assert issues_doc["repository"] == DEMO_REPO
    issue_keys = {
        "url", "repository_url", "html_url", "comments_url", "id", "node_id", "number", "title", "user", "labels",
        "state", "state_reason", "locked", "assignee", "assignees", "comments", "created_at", "updated_at",
        "closed_at", "author_association", "body",
    }  # fmt: skip
    pull_keys = {
        "url", "id", "node_id", "html_url", "diff_url", "patch_url", "issue_url", "number", "state", "locked",
        "title", "user", "body", "created_at", "updated_at", "closed_at", "merged_at", "merge_commit_sha", "draft",
        "head", "base", "author_association",
    }  # fmt: skip
    comment_keys = {
        "url",
        "html_url",
        "issue_url",
        "id",
        "node_id",
        "user",
        "created_at",
        "updated_at",
        "author_association",
        "body",
    }
    assert all(issue_keys <= set(issue) for issue in issues_doc["issues"])
    assert all(pull_keys <= set(pull) for pull in issues_doc["pulls"])
    assert all(comment_keys <= set(comment) for comment in issues_doc["comments"])
    stamp = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
    text = demo_repo.issues_path.read_text()
    assert all(
        stamp.fullmatch(value)
        for value in re.findall(r'"(?:created|updated|closed|merged)_at": "([^"]*)"', text)
    )
    assert "<head-sha-of-pull-" not in text
    assert text.startswith('{\n  "comments"'), "sorted keys, indent 2"

    numbers = sorted(issue["number"] for issue in issues_doc["issues"])
    assert numbers == list(range(1, len(numbers) + 1)), "issues and PRs share one sequence"
    by_number = sorted(issues_doc["issues"], key=lambda issue: issue["number"])
    assert [issue["created_at"] for issue in by_number] == sorted(issue["created_at"] for issue in by_number)
    as_pulls = {issue["number"] for issue in issues_doc["issues"] if "pull_request" in issue}
    assert as_pulls == {pull["number"] for pull in issues_doc["pulls"]} == set(PULLS)
    for issue in issues_doc["issues"]:
        if "pull_request" in issue:
            assert set(issue["pull_request"]) == {"url", "html_url", "diff_url", "patch_url", "merged_at"}
    counts = {issue["number"]: issue["comments"] for issue in issues_doc["issues"]}
    for number, count in counts.items():
        on_it = [c for c in issues_doc["comments"] if c["issue_url"].endswith(f"/issues/{number}")]
        assert len(on_it) == count


def test_pulls_in_issues_json_match_git(issues_doc: dict, demo_repo: DemoRepo):
    repo = demo_repo.path
    landings = _landings(repo)
    for pull_object in issues_doc["pulls"]:
        number = pull_object["number"]
        pull = PULLS[number]
        head = _git(repo, "rev-parse", f"refs/pull/{number}/head")
        assert pull_object["head"]["sha"] == head
        assert pull_object["base"]["ref"] == "main" and _is_ancestor(repo, pull_object["base"]["sha"], head)
        assert pull_object["title"] == pull.title and pull_object["state"] == "closed"
        first_commit = _git(
            repo, "log", "--reverse", "--format=%aI", f"{pull_object['base']['sha']}..{head}"
        ).splitlines()[0]
        assert pull_object["created_at"] >= _iso(first_commit)
        if pull.merge_style == "unmerged":
            assert pull_object["merged_at"] is None and pull_object["merge_commit_sha"] is None
        else:
            landing = landings[number]
            assert pull_object["merge_commit_sha"] == landing
            assert pull_object["merged_at"] == _iso(_git(repo, "log", "-1", "--format=%cI", landing))
            assert pull_object["merged_at"] == pull_object["closed_at"] > pull_object["created_at"]


def test_linked_issues_are_real_earlier_issues(issues_doc: dict):
    issues = {issue["number"]: issue for issue in issues_doc["issues"]}
    pulls = {pull["number"]: pull for pull in issues_doc["pulls"]}
    closed_by_merge = set()
    for pull in DEMO_PULLS:
        for number in pull.linked_issues:
            issue = issues[number]
            assert "pull_request" not in issue
            assert issue["created_at"] < pulls[pull.number]["created_at"]
            if pull.merge_style != "unmerged":
                closed_by_merge.add(number)
                assert issue["state"] == "closed" and issue["closed_at"] == pulls[pull.number]["merged_at"]
    still_open = {
        n for n, issue in issues.items() if "pull_request" not in issue and n not in closed_by_merge
    }
    assert still_open and all(issues[n]["state"] == "open" for n in still_open)


def test_pull_texts_exercise_issue_linking(issues_doc: dict, demo_repo: DemoRepo):
    repo = demo_repo.path
    pulls = {pull["number"]: pull for pull in issues_doc["pulls"]}
    issues = {issue["number"]: issue for issue in issues_doc["issues"]}
    bodies = " ".join(pull["body"] for pull in issues_doc["pulls"])
    for keyword in (
        r"\bFixes #\d+",
        r"\bcloses #\d+",
        r"\bResolved #\d+",
        rf"\bfix {DEMO_REPO}#\d+",
        rf"\bCloses https://github\.com/{DEMO_REPO}/issues/\d+",
    ):
        assert re.search(keyword, bodies), keyword
    pull_targets = [
        (number, int(target))
        for number, pull in pulls.items()
        for target in re.findall(r"\b[Ff]ixes #(\d+)", pull["body"])
        if "pull_request" in issues[int(target)]
    ]
    assert pull_targets and all(target not in PULLS[number].linked_issues for number, target in pull_targets)
    mentions = [
        (number, int(target))
        for number, pull in pulls.items()
        for target in re.findall(r"\b(?:[Ss]ee|related to) #(\d+)", pull["body"])
    ]
    assert mentions and all(target not in PULLS[number].linked_issues for number, target in mentions)
    assert any(not PULLS[number].linked_issues for number, _ in mentions), "a PR that only mentions an issue"
    for pull in DEMO_PULLS:
        if pull.expected_bucket == "no_linked_issue" and not any(n == pull.number for n, _ in mentions):
            texts = pulls[pull.number]["body"] + pull.title
            texts += _git(
                repo,
                "log",
                "--format=%B",
                f"{pulls[pull.number]['base']['sha']}..refs/pull/{pull.number}/head",
            )
            assert "#" not in texts and "/issues/" not in texts


def test_issue_comments_before_and_after_the_fix(issues_doc: dict, demo_repo: DemoRepo):
    repo = demo_repo.path
    pulls = {pull["number"]: pull for pull in issues_doc["pulls"]}
    before, after = 0, 0
    for pull in KEPT:
        first_commit = _iso(
            _git(
                repo,
                "log",
                "--reverse",
                "--format=%aI",
                f"{pulls[pull.number]['base']['sha']}..refs/pull/{pull.number}/head",
            ).splitlines()[0]
        )
        for number in pull.linked_issues:
            for comment in issues_doc["comments"]:
                if comment["issue_url"].endswith(f"/issues/{number}"):
                    before += comment["created_at"] < first_commit
                    after += comment["created_at"] > first_commit
    assert before >= 2 and after >= 2


def test_the_leaking_issue_contains_the_gold_patch(issues_doc: dict, demo_repo: DemoRepo):
    repo = demo_repo.path
    issues = {issue["number"]: issue for issue in issues_doc["issues"]}
    (pull,) = [pull for pull in DEMO_PULLS if pull.leaks_fix]
    commits = _PullCommits(repo, pull)
    gold = _git(repo, "diff", commits.base, commits.head, "--", *commits.paths("source"))
    added = [line[1:] for line in gold.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert added
    (body,) = [issues[number]["body"] for number in pull.linked_issues]
    assert "```" in body
    assert all(line in body for line in added)
    head = _git(repo, "rev-parse", f"refs/pull/{pull.number}/head")
    assert f"https://github.com/{DEMO_REPO}/commit/{head}" in body or f"/pull/{pull.number}" in body


# --- the ground truth holds when textkit's tests run --------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("pull", TESTED, ids=lambda pull: f"pr{pull.number}")
def test_fail_to_pass_and_pass_to_pass_hold(pull: DemoPull, demo_repo: DemoRepo, snapshots: _Snapshots):
    commits = _PullCommits(demo_repo.path, pull)
    test_paths = commits.paths("test")
    targets = [path for path in test_paths if re.search(r"(^|/)test_\w+\.py$", path)]
    before_dir = snapshots.export(commits.base, overlay_from=commits.landing, overlay=test_paths)
    after_dir = snapshots.export(commits.landing)
    # After the landing the whole suite runs: this also proves the landing commit is green.
    with ThreadPoolExecutor(max_workers=2) as pool:
        before, after = pool.map(snapshots.run_tests, (before_dir, after_dir), (targets, ()))
    collected = {node_id for node_id in after if node_id.split("::")[0] in targets}
    assert collected == set(pull.fail_to_pass) | set(pull.pass_to_pass) | set(pull.flaky)
    assert {
        node_id: before.get(node_id, "MISSING")
        for node_id in pull.fail_to_pass
        if before.get(node_id) == "PASSED"
    } == {}
    assert {
        node_id: before.get(node_id, "MISSING")
        for node_id in pull.pass_to_pass
        if before.get(node_id) != "PASSED"
    } == {}
    flaky = {node_id for other in DEMO_PULLS for node_id in other.flaky}
    assert {
        node_id: outcome for node_id, outcome in after.items() if outcome != "PASSED" and node_id not in flaky
    } == {}


@pytest.mark.slow
@pytest.mark.parametrize(
    "pull", [pull for pull in DEMO_PULLS if pull.partial_fixes], ids=lambda pull: f"pr{pull.number}"
)
def test_partial_fixes_pass_exactly_their_subset(pull: DemoPull, demo_repo: DemoRepo, snapshots: _Snapshots):
    commits = _PullCommits(demo_repo.path, pull)
    test_paths = commits.paths("test")
    directories = [
        snapshots.export(commits.base, overlay_from=commits.landing, overlay=test_paths, patch=fix.patch)
        for fix in pull.partial_fixes
    ]
    ids = list(pull.fail_to_pass + pull.pass_to_pass)
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda directory: snapshots.run_tests(directory, ids), directories))
    for fix, outcomes in zip(pull.partial_fixes, results, strict=True):
        passed = {node_id for node_id, outcome in outcomes.items() if outcome == "PASSED"}
        assert passed & set(pull.fail_to_pass) == set(fix.passes), fix.name
        assert set(pull.pass_to_pass) <= passed, fix.name


@pytest.mark.slow
def test_flaky_test_depends_on_the_hash_seed(demo_repo: DemoRepo, snapshots: _Snapshots):
    (pull,) = [pull for pull in DEMO_PULLS if pull.flaky]
    directory = snapshots.export(_landings(demo_repo.path)[pull.number])
    ids = list(pull.flaky + pull.fail_to_pass)
    with ThreadPoolExecutor(max_workers=4) as pool:
        runs = list(pool.map(lambda seed: snapshots.run_tests(directory, ids, seed=seed), HASH_SEEDS))
    for node_id in pull.flaky:
        assert {run.get(node_id) for run in runs} == {"PASSED", "FAILED"}, node_id
    for node_id in pull.fail_to_pass:
        assert {run.get(node_id) for run in runs} == {"PASSED"}, node_id


@pytest.mark.slow
def test_other_main_commits_pass_their_own_suite(demo_repo: DemoRepo, snapshots: _Snapshots):
    """Every commit on main is green; the landings of TESTED PRs are run by the test above."""
    repo = demo_repo.path
    flaky = {node_id for pull in DEMO_PULLS for node_id in pull.flaky}
    landings = _landings(repo)
    checked = {landings[pull.number] for pull in TESTED}
    commits = [
        commit
        for commit in _git(repo, "rev-list", "--first-parent", "main").splitlines()
        if commit not in checked
    ]
    directories = [snapshots.export(commit) for commit in commits]
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(snapshots.run_tests, directories))
    for commit, outcomes in zip(commits, runs, strict=True):
        failing = {
            node_id: outcome
            for node_id, outcome in outcomes.items()
            if outcome != "PASSED" and node_id not in flaky
        }
        assert outcomes and not failing, commit
    assert len(runs[0]) >= 50
