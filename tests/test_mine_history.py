"""Local-history mining on repositories shaped the way real projects land PRs.

Each test builds its own git repository in a temp dir: a maintenance branch merged into main
later, a two-parent merge titled ``Title (#N)``, a squash titled ``Title(#N)``, a PR rebased onto
main (its ``refs/pull/N/head`` keeps the original commits), a fast-forwarded PR, unmerged PRs and a
PR merged only into the maintenance branch. Every expectation is checked against git itself.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from repo2env.jsonl import read_tasks
from repo2env.mine.git import GitSource
from repo2env.mine.miner import MineOptions, mine

ADA = ("Ada Lovelace", "ada@example.com")
GRACE = ("Grace Hopper", "grace@example.com")
MAINT = ("Linus Maintainer", "maint@example.com")


@dataclass
class Repo:
    path: Path
    clock: int = 0
    marks: dict[str, str] = field(default_factory=dict)

    @classmethod
    def create(cls, path: Path) -> Repo:
        """An empty repository at ``path`` on branch main."""
        repo = cls(path)
        path.mkdir()
        repo.git("init", "-q", "-b", "main")
        return repo

    def git(self, *args: str, who: tuple[str, str] = MAINT, date: str | None = None) -> str:
        self.clock += 1
        stamp = f"2024-03-{1 + self.clock // 24:02d}T{self.clock % 24:02d}:00:00+00:00"
        env = {**os.environ, "GIT_AUTHOR_NAME": who[0], "GIT_AUTHOR_EMAIL": who[1], "GIT_AUTHOR_DATE": date or stamp,
               "GIT_COMMITTER_NAME": MAINT[0], "GIT_COMMITTER_EMAIL": MAINT[1], "GIT_COMMITTER_DATE": stamp}
        done = subprocess.run(["git", "-C", str(self.path), *args], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def commit(self, message: str, files: dict[str, str], who: tuple[str, str] = MAINT) -> str:
        for name, text in files.items():
            target = self.path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message, who=who)
        return self.git("rev-parse", "HEAD")

    def fix(self, name: str, message: str, who: tuple[str, str] = ADA) -> str:
        """A PR-sized commit: a source module and its test."""
        return self.commit(message, {f"src/widget/{name}.py": f"def {name}():\n    return {name!r}\n",
                                     f"tests/test_{name}.py": f"from widget.{name} import {name}\n\n\n"
                                                              f"def test_{name}():\n    assert {name}() == {name!r}\n"},
                           who=who)

    def pull_ref(self, number: int, sha: str) -> None:
        self.git("update-ref", f"refs/pull/{number}/head", sha)

    def merge_base(self, left: str, right: str) -> str:
        return self.git("merge-base", left, right)


def _build(path: Path) -> Repo:
    repo = Repo.create(path)
    repo.commit("Initial commit", {
        "pyproject.toml": '[project]\nname = "widget"\ndynamic = ["version"]\n',
        "src/widget/__init__.py": "",
        "tests/test_nothing.py": "def test_nothing():\n    pass\n",
    })
    repo.git("tag", "v1.2.0")
    # stable: a maintenance branch with its own commit, a PR (#10) merged into it, and later
    # stable merged into main.
    repo.git("checkout", "-q", "-b", "stable")
    repo.marks["stable_fix"] = repo.commit("Backport a fix", {"src/widget/compat.py": "X = 1\n"})
    repo.git("checkout", "-q", "-b", "fix-ten")
    repo.pull_ref(10, repo.fix("ten", "Handle ten"))
    repo.git("checkout", "-q", "stable")
    repo.commit("Prepare 1.2.1", {"CHANGES.rst": "1.2.1\n"})
    repo.git("merge", "-q", "--no-ff", "fix-ten", "-m", "Merge pull request #10 from ada/fix-ten\n\nHandle ten properly")
    repo.marks["merge10"] = repo.git("rev-parse", "HEAD")
    # main: a merge titled "Title (#11)" (two parents), then stable merged in.
    repo.git("checkout", "-q", "main")
    repo.commit("Main work", {"src/widget/core.py": "Y = 1\n"})
    repo.git("checkout", "-q", "-b", "eleven")
    repo.pull_ref(11, repo.fix("eleven", "Add eleven", who=GRACE))
    repo.git("checkout", "-q", "main")
    repo.commit("More main work", {"src/widget/core.py": "Y = 2\n"})
    repo.git("merge", "-q", "--no-ff", "eleven", "-m", "Add eleven (#11)\n\nEleven is needed.")
    repo.marks["merge11"] = repo.git("rev-parse", "HEAD")
    repo.git("merge", "-q", "--no-ff", "stable", "-m", "Merge branch 'stable'")
    # A squash titled without a space: "Title(#12)".
    repo.git("checkout", "-q", "-b", "twelve")
    repo.pull_ref(12, repo.fix("twelve", "wip twelve"))
    repo.git("checkout", "-q", "main")
    repo.commit("Unrelated", {"README.md": "widget\n"})
    repo.git("merge", "-q", "--squash", "twelve")
    repo.marks["squash12"] = repo.commit("Add twelve(#12)", {}, who=ADA)
    # #13 rebased onto main: two commits replayed (same author, date, message), new SHAs.
    repo.git("checkout", "-q", "-b", "thirteen")
    repo.fix("thirteen", "Start thirteen", who=GRACE)
    repo.pull_ref(13, repo.commit("Test thirteen more", {"tests/test_thirteen.py": "def test_more():\n    pass\n"},
                                  who=GRACE))
    repo.git("checkout", "-q", "main")
    repo.marks["before13"] = repo.commit("Main moves on", {"src/widget/core.py": "Y = 3\n"})
    repo.git("cherry-pick", "thirteen~1", "thirteen")
    repo.marks["rebased13"] = repo.git("rev-parse", "HEAD")
    # #14 never merged; #15 merged into stable only, after stable was merged into main.
    repo.git("checkout", "-q", "-b", "fourteen")
    repo.pull_ref(14, repo.fix("fourteen", "Try fourteen"))
    repo.git("checkout", "-q", "stable")
    repo.git("checkout", "-q", "-b", "fifteen")
    repo.pull_ref(15, repo.fix("fifteen", "Add fifteen"))
    repo.git("checkout", "-q", "stable")
    repo.commit("Stable only", {"CHANGES.rst": "1.2.2\n"})
    repo.git("merge", "-q", "--no-ff", "fifteen", "-m", "Merge pull request #15 from ada/fifteen\n\nAdd fifteen")
    repo.git("checkout", "-q", "main")
    for branch in ("fix-ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen"):
        repo.git("branch", "-q", "-D", branch)
    return repo


@pytest.fixture(scope="module")
def history_repo(tmp_path_factory) -> Repo:
    return _build(tmp_path_factory.mktemp("history") / "widget")


@pytest.fixture(scope="module")
def mined(history_repo, tmp_path_factory):
    result = mine(GitSource(history_repo.path, repo="acme/widget"), tmp_path_factory.mktemp("out"),
                  MineOptions(allow_no_issue=True))
    return result, {task.pull_number: task for task in read_tasks(result.tasks_path)}


def test_every_landing_reachable_from_main_is_found_with_its_base(history_repo, mined):
    result, tasks = mined
    repo = history_repo
    assert set(tasks) == {10, 11, 12, 13}, {r.pull_number: (r.reason, r.detail) for r in result.funnel.rejections}
    # #10 was merged into stable: its base is on stable (the merge base there), not on main's line.
    merge10 = tasks[10].merge_commit
    assert merge10 == repo.marks["merge10"]
    assert tasks[10].base_commit == repo.merge_base(f"{merge10}^1", f"{merge10}^2") == repo.marks["stable_fix"]
    assert tasks[11].merge_commit == repo.marks["merge11"]
    assert tasks[11].base_commit == repo.merge_base(f"{repo.marks['merge11']}^1", "refs/pull/11/head")
    assert tasks[12].merge_commit == repo.marks["squash12"]
    assert tasks[12].base_commit == repo.git("rev-parse", f"{repo.marks['squash12']}^")
    # #13: the rebased copies, not the original commits; the base is before the first copy.
    assert tasks[13].merge_commit == repo.marks["rebased13"]
    assert tasks[13].base_commit == repo.marks["before13"]
    assert "test_more" in tasks[13].test_patch and "def thirteen" in tasks[13].patch
    for task in tasks.values():
        diff = repo.git("diff", task.base_commit, task.merge_commit if task.pull_number != 10 else f"{merge10}^2",
                        "--", "src", "tests")
        assert f"src/widget/{_name(task.pull_number)}.py" in diff
        assert task.problem_statement.strip()
    assert tasks[10].problem_statement.startswith("Handle ten properly")
    assert tasks[11].problem_statement.startswith("Add eleven")
    assert tasks[12].problem_statement.startswith("Add twelve")
    assert "Start thirteen" in tasks[13].problem_statement


def _name(number: int) -> str:
    return {10: "ten", 11: "eleven", 12: "twelve", 13: "thirteen", 15: "fifteen"}[number]


def test_every_not_merged_says_why(mined):
    result, _ = mined
    details = {r.pull_number: r.detail for r in result.funnel.rejections if r.reason == "not_merged"}
    assert set(details) == {14, 15}
    assert "not in main's history" in details[14] and "#14" in details[14]
    assert "merged into stable only" in details[15] and "--branch stable" in details[15]


def test_mining_the_maintenance_branch_finds_its_own_merges(history_repo, tmp_path):
    result = mine(GitSource(history_repo.path, repo="acme/widget", branch="stable"), tmp_path,
                  MineOptions(allow_no_issue=True))
    tasks = {task.pull_number: task for task in result.new_tasks}
    assert set(tasks) == {10, 15}
    merge15 = tasks[15].merge_commit
    assert tasks[15].base_commit == history_repo.merge_base(f"{merge15}^1", "refs/pull/15/head")
    details = {r.pull_number: r.detail for r in result.funnel.rejections if r.reason == "not_merged"}
    assert "merged into main only" in details[11]


def test_scm_version_is_what_git_describe_gives_at_the_base(history_repo, mined):
    _, tasks = mined
    for task in tasks.values():
        distance = int(history_repo.git("rev-list", "--count", f"v1.2.0..{task.base_commit}"))
        node = task.scm_version.rsplit("+g", 1)[-1]
        assert task.scm_version == f"1.2.1.dev{distance}+g{node}" and task.base_commit.startswith(node)
        # pyproject's version is dynamic: X.Y comes from the tag.
        assert task.version == "1.2"


def test_exact_tag_and_no_tag(tmp_path):
    repo = Repo.create(tmp_path / "tagged")
    repo.commit("Initial commit", {"src/widget/__init__.py": "", "tests/test_a.py": ""})
    base = repo.git("rev-parse", "HEAD")
    repo.git("checkout", "-q", "-b", "one")
    repo.pull_ref(1, repo.fix("one", "Add one"))
    repo.git("checkout", "-q", "main")
    repo.git("merge", "-q", "--no-ff", "one", "-m", "Merge pull request #1 from ada/one\n\nAdd one")
    untagged = mine(GitSource(repo.path, repo="acme/widget"), tmp_path / "untagged", MineOptions(allow_no_issue=True))
    assert [(task.scm_version, task.version) for task in untagged.new_tasks] == [("", "")]
    repo.git("tag", "v2.0.0", base)
    tagged = mine(GitSource(repo.path, repo="acme/widget"), tmp_path / "tagged", MineOptions(allow_no_issue=True))
    assert [(task.scm_version, task.version) for task in tagged.new_tasks] == [("2.0.0", "2.0")]


def test_a_subject_naming_another_prs_number_is_not_its_landing(tmp_path):
    """A fork's own "Merge pull request #1" and an old "(#2)" ticket reference do not land PRs #1 and #2."""
    repo = Repo.create(tmp_path / "fork")
    repo.commit("Initial commit", {"src/widget/__init__.py": "", "tests/test_a.py": ""})
    repo.commit("Fix an old ticket (#2)", {"src/widget/old.py": "Z = 1\n"})
    repo.git("checkout", "-q", "-b", "fork-work")
    repo.git("checkout", "-q", "-b", "fork-pr")
    repo.fix("forked", "Forked change")
    repo.git("checkout", "-q", "fork-work")
    repo.git("merge", "-q", "--no-ff", "fork-pr", "-m", "Merge pull request #1 from someone/fork-pr")
    repo.git("checkout", "-q", "main")
    repo.git("merge", "-q", "--no-ff", "fork-work", "-m", "Merge branch 'fork-work'")
    repo.git("checkout", "-q", "-b", "real")
    repo.pull_ref(1, repo.fix("one", "The real PR one"))
    repo.pull_ref(2, repo.fix("two", "The real PR two"))
    repo.git("checkout", "-q", "main")
    result = mine(GitSource(repo.path, repo="acme/widget"), tmp_path / "out", MineOptions(allow_no_issue=True))
    assert result.new_tasks == []
    assert {r.pull_number: r.reason for r in result.funnel.rejections} == {1: "not_merged", 2: "not_merged"}


def test_a_one_parent_merge_subject_lands_its_pr(tmp_path):
    """A "Merge pull request #N" commit with one parent (a merge a history rewrite flattened): its
    own diff is the PR's, though the PR's head is not in main's history."""
    repo = Repo.create(tmp_path / "flat")
    repo.commit("Initial commit", {"src/widget/__init__.py": "", "tests/test_a.py": ""})
    repo.git("checkout", "-q", "-b", "side")
    repo.pull_ref(30, repo.fix("thirty", "Add thirty"))
    repo.git("checkout", "-q", "main")
    base = repo.commit("Main moves on", {"README.md": "widget\n"})
    repo.git("merge", "-q", "--squash", "side")
    flat = repo.commit("Merge pull request #30 from ada/side\n\nAdd thirty, flattened", {})
    repo.git("branch", "-q", "-D", "side")
    result = mine(GitSource(repo.path, repo="acme/widget"), tmp_path / "out", MineOptions(allow_no_issue=True))
    assert [(task.pull_number, task.base_commit, task.merge_commit) for task in result.new_tasks] == [(30, base, flat)]
    assert "def thirty" in result.new_tasks[0].patch and "test_thirty" in result.new_tasks[0].test_patch
    assert result.new_tasks[0].problem_statement.startswith("Add thirty, flattened")


def test_empty_problem_statement_is_rejected_with_its_reason(tmp_path):
    repo = Repo.create(tmp_path / "terse")
    repo.commit("Initial commit", {"src/widget/__init__.py": "", "tests/test_a.py": ""})
    repo.git("checkout", "-q", "-b", "one")
    repo.pull_ref(1, repo.fix("one", "Add one"))
    repo.git("checkout", "-q", "main")
    repo.git("merge", "-q", "--no-ff", "one", "-m", "Merge pull request #1 from ada/one")  # no title recorded
    repo.git("checkout", "-q", "-b", "two")
    repo.fix("two", "x")
    repo.git("commit", "-q", "--amend", "--allow-empty-message", "-m", "")
    repo.pull_ref(2, repo.git("rev-parse", "HEAD"))
    repo.git("checkout", "-q", "main")
    # Neither the merge nor the PR's only commit says anything.
    repo.git("merge", "-q", "--no-ff", "two", "-m", "Merge pull request #2 from ada/two")
    result = mine(GitSource(repo.path, repo="acme/widget"), tmp_path / "out", MineOptions(allow_no_issue=True))
    # #1 has no PR title in history: its one commit's message is the statement.
    assert [(task.pull_number, task.problem_statement) for task in result.new_tasks] == [(1, "Add one")]
    assert {(r.pull_number, r.reason) for r in result.funnel.rejections} == {(2, "empty_problem_statement")}


def test_a_rerun_keeps_the_funnels_of_earlier_runs(history_repo, tmp_path):
    source = GitSource(history_repo.path, repo="acme/widget")
    first = mine(source, tmp_path, MineOptions(allow_no_issue=True, limit=1))
    assert len(first.new_tasks) == 1
    mine(source, tmp_path, MineOptions(allow_no_issue=True, pull_numbers=frozenset({14})))
    third = mine(source, tmp_path, MineOptions(allow_no_issue=True))
    on_disk = json.loads((tmp_path / "funnel.json").read_text())
    assert [run["counts"]["scanned"] for run in on_disk["previous_runs"]] == [
        first.funnel.counts["scanned"], third.funnel.counts["scanned"]]
    assert on_disk["previous_runs"][0]["counts"]["kept"] == 1
    assert on_disk["previous_runs"][1]["rejections"] == [
        {"pull_number": 14, "stage": "mine", "reason": "not_merged", "detail": on_disk["previous_runs"][1]["rejections"][0]["detail"]}]
    assert on_disk["counts"]["already_mined"] == 1 and on_disk["counts"]["kept"] == 3
    assert on_disk["totals"] == {"runs": 3, "kept": 4, "rejected:not_merged": 2}


@pytest.mark.parametrize(("layout", "init_text", "expected"), [
    ("src/widget", '__version__ = "3.4.5"\n', "3.4"),   # a src layout, version in the package
    ("widget", '__version__ = "3.4.5"\n', "3.4"),       # a flat layout
    ("src/widget", 'try:\n    from ._version import version as __version__\nexcept ImportError:\n'
                   '    __version__ = "unknown"\n', "2.0"),  # setuptools-scm's fallback: the tag decides
])
def test_static_version_from_the_package_else_the_tag(tmp_path, layout, init_text, expected):
    repo = Repo.create(tmp_path / "pkg")
    repo.commit("Initial commit", {"pyproject.toml": '[project]\nname = "widget"\ndynamic = ["version"]\n',
                                   f"{layout}/__init__.py": init_text, "tests/test_a.py": ""})
    repo.git("tag", "2.0.0")
    repo.git("checkout", "-q", "-b", "one")
    repo.pull_ref(1, repo.commit("Add one", {f"{layout}/one.py": "ONE = 1\n", "tests/test_one.py": "def test(): pass\n"}))
    repo.git("checkout", "-q", "main")
    repo.git("merge", "-q", "--no-ff", "one", "-m", "Merge pull request #1 from ada/one\n\nAdd one")
    result = mine(GitSource(repo.path, repo="acme/widget"), tmp_path / "out", MineOptions(allow_no_issue=True))
    assert [(task.version, task.scm_version) for task in result.new_tasks] == [(expected, "2.0.0")]


def test_a_fast_forwarded_head_lands_once(tmp_path):
    """A PR pushed straight onto main (fast-forward) is merged; its base is before its author's run
    of commits. A second PR on the same head (re-opened) is not a second task."""
    repo = Repo.create(tmp_path / "ff")
    base = repo.commit("Initial commit", {"src/widget/__init__.py": "", "tests/test_a.py": ""})
    repo.git("checkout", "-q", "-b", "ff")
    repo.fix("one", "Add one")
    head = repo.commit("Test one more", {"tests/test_one_more.py": "def test(): pass\n"}, who=ADA)
    repo.pull_ref(20, head)
    repo.pull_ref(21, head)
    repo.git("checkout", "-q", "main")
    repo.git("merge", "-q", "--ff-only", "ff")
    result = mine(GitSource(repo.path, repo="acme/widget"), tmp_path / "out", MineOptions(allow_no_issue=True))
    assert [(task.pull_number, task.base_commit, task.merge_commit) for task in result.new_tasks] == [(21, base, head)]
    assert "test_one_more" in result.new_tasks[0].test_patch and "def one" in result.new_tasks[0].patch
    assert [(r.pull_number, r.reason, r.detail) for r in result.funnel.rejections] == [
        (20, "not_merged", f"its head {head[:12]} landed as part of PR #21")]


def test_in_memory_graph_walks_agree_with_git(history_repo):
    """merge_base and commits_between walk the graph in memory (git's paint-down walk) for commits
    off the mainline; git itself must give the same answers for every pair of them."""
    from repo2env.mine.history import GitHistory

    history = GitHistory(history_repo.path)
    stable = history_repo.git("rev-parse", "stable")
    points = [history_repo.git("rev-parse", f"refs/pull/{number}/head") for number in range(10, 16)]
    points += [history_repo.marks["stable_fix"], history_repo.marks["merge10"], stable]
    assert not any(history.on_mainline(sha) for sha in points)
    for left in points:
        for right in points:
            bases = history_repo.git("merge-base", "--all", left, right).split()
            assert len(bases) == 1 and history.merge_base(left, right) == bases[0], (left, right)
            between = {commit.sha for commit in history.commits_between(left, right)}
            assert between == set(history_repo.git("rev-list", f"{left}..{right}").split()), (left, right)


def test_batch_object_readers_agree_with_git(history_repo):
    """The one-process ``git cat-file`` readers give what one git call per object gives."""
    from repo2env.mine.history import GitHistory

    history = GitHistory(history_repo.path)
    merge10 = history_repo.marks["merge10"]
    queries = [f"{merge10}:pyproject.toml", f"{merge10}:src/widget", f"{merge10}:no/such/file", "main:CHANGES.rst",
               f"{history_repo.marks['stable_fix']}:src/widget/compat.py", "main:README.md"]
    ids = history.objects.blob_ids(queries)
    blobs = history.objects.blobs(queries)
    trees = history.objects.objects(queries, "tree")
    for query in queries:
        kind = subprocess.run(["git", "-C", str(history_repo.path), "cat-file", "-t", query],
                              capture_output=True, text=True).stdout.strip()
        if kind == "blob":
            assert ids[query] == history_repo.git("rev-parse", query)
            assert blobs[query] == history_repo.git("cat-file", "blob", query) + "\n"
        else:
            assert ids[query] is None and query not in blobs
        assert (query in trees) == (kind == "tree")
    assert blobs and trees  # both kinds were really asked for


def test_a_test_configuration_change_alone_is_no_test_change(tmp_path):
    """A PR whose only change on the test side is tox.ini (a CI matrix, a lint pin) has no test to
    fail before its fix; one that also changes a test module is kept."""
    repo = Repo.create(tmp_path / "config")
    repo.commit("Initial commit", {"src/widget/__init__.py": "", "tests/test_a.py": "def test_a():\n    pass\n",
                                   "tox.ini": "[tox]\nenvlist = py38\n"})
    repo.git("checkout", "-q", "-b", "matrix")
    repo.pull_ref(1, repo.commit("Test on 3.9", {"src/widget/__init__.py": "VERSION = 2\n",
                                                 "tox.ini": "[tox]\nenvlist = py38,py39\n"}, who=ADA))
    repo.git("checkout", "-q", "main")
    repo.git("merge", "-q", "--no-ff", "matrix", "-m", "Merge pull request #1 from ada/matrix")
    repo.git("checkout", "-q", "-b", "real")
    repo.pull_ref(2, repo.commit("Add three", {"src/widget/three.py": "THREE = 3\n",
                                               "tox.ini": "[tox]\nenvlist = py38,py39,py310\n",
                                               "tests/test_three.py": "from widget.three import THREE\n"}, who=ADA))
    repo.git("checkout", "-q", "main")
    repo.git("merge", "-q", "--no-ff", "real", "-m", "Merge pull request #2 from ada/real")
    result = mine(GitSource(repo.path, repo="acme/widget"), tmp_path / "out", MineOptions(allow_no_issue=True))
    assert [task.pull_number for task in result.new_tasks] == [2]
    assert [(r.pull_number, r.reason, r.detail) for r in result.funnel.rejections] == [
        (1, "no_test_changes", "only test configuration: tox.ini")]


def test_a_javascript_change_whose_tests_only_check_types_is_no_test_change(tmp_path):
    """tsd's type tests (index.test-d.ts), TypeScript in a test tree's types/ folder and Flow's type
    tests (test/_flow.js) are read by a type checker, never run by a test runner: a PR whose test side is only these is rejected with
    that reason; one that also changes a runtime test is kept."""
    repo = Repo.create(tmp_path / "typed")
    repo.commit("Initial commit", {"package.json": '{"name": "typed", "scripts": {"test": "ava && tsd"}}',
                                   "index.js": "module.exports = (a) => a;\n", "index.d.ts": "export default any;\n",
                                   "index.test-d.ts": "import f from '.';\n", "test.js": "require('ava');\n"})
    for number, files in ((1, {"index.d.ts": "export default function (a: string): string;\n",
                               "index.test-d.ts": "import f from '.';\nf('a');\n"}),
                          (2, {"index.d.ts": "export default function (a: number): number;\n",
                               "test/types/api.ts": "import f from '../..';\nf(1);\n"}),
                          # Flow's, as chalk's: a declaration beside the code, `$ExpectError` lines in test/_flow.js.
                          (4, {"index.d.ts": "export default function (a: 1): 1;\n", "index.js.flow": "// @flow\n",
                               "test/_flow.js": "// @flow\n// $ExpectError\nf(null);\n"}),
                          (3, {"index.js": "module.exports = (a) => a + 1;\n", "index.test-d.ts": "import f from '.';\n",
                               "test.js": "require('ava');\n// adds one\n"})):
        repo.git("checkout", "-q", "-b", f"change-{number}")
        repo.pull_ref(number, repo.commit(f"Change {number}", files, who=ADA))
        repo.git("checkout", "-q", "main")
        repo.git("merge", "-q", "--no-ff", f"change-{number}", "-m", f"Merge pull request #{number} from ada/change-{number}")
    result = mine(GitSource(repo.path, repo="acme/typed"), tmp_path / "out", MineOptions(allow_no_issue=True))
    assert [task.pull_number for task in result.new_tasks] == [3]
    assert sorted((r.pull_number, r.reason, r.detail) for r in result.funnel.rejections) == [
        (1, "no_test_changes", "only type tests: index.test-d.ts"),
        (2, "no_test_changes", "only type tests: test/types/api.ts"),
        (4, "no_test_changes", "only type tests: test/_flow.js")]

def test_a_head_that_is_another_prs_merge_landed_as_that_pr(tmp_path):
    """A PR opened from a branch whose tip is PR #1's merge commit brings nothing of its own: it is
    not mined twice, and its reason names the PR it landed as."""
    repo = Repo.create(tmp_path / "again")
    repo.commit("Initial commit", {"src/widget/__init__.py": "", "tests/test_a.py": ""})
    repo.git("checkout", "-q", "-b", "one")
    repo.pull_ref(1, repo.fix("one", "Add one"))
    repo.git("checkout", "-q", "main")
    repo.git("merge", "-q", "--no-ff", "one", "-m", "Merge pull request #1 from ada/one\n\nAdd one")
    merge = repo.git("rev-parse", "HEAD")
    repo.pull_ref(2, merge)
    result = mine(GitSource(repo.path, repo="acme/widget"), tmp_path / "out", MineOptions(allow_no_issue=True))
    assert [task.pull_number for task in result.new_tasks] == [1]
    assert [(r.pull_number, r.reason, r.detail) for r in result.funnel.rejections] == [
        (2, "not_merged", f"its head {merge[:12]} landed as part of PR #1")]


@pytest.mark.parametrize("merged_as", ["Merge pull request #2 from ada/one", "Merge branch 'one'"])
def test_a_branch_carried_on_after_its_pr_names_what_brought_its_head(tmp_path, merged_as):
    """PR #1's head merges main into its branch (so no fast-forward can have landed it), and the
    branch is carried on and merged later: as PR #2 (a maintainer took the stale PR over:
    marshmallow-code/marshmallow 625, merged as 816), PR #1's head landed as part of PR #2; by a
    merge that names no PR, the reason names the commit that brought the head."""
    repo = Repo.create(tmp_path / "carried")
    repo.commit("Initial commit", {"src/widget/__init__.py": "", "tests/test_a.py": ""})
    repo.git("checkout", "-q", "-b", "one")
    repo.fix("one", "Add one")
    repo.git("checkout", "-q", "main")
    repo.commit("Docs", {"docs.txt": "widget\n"})
    repo.git("checkout", "-q", "one")
    repo.git("merge", "-q", "--no-ff", "main", "-m", "Merge branch 'main' into one")
    head = repo.git("rev-parse", "HEAD")
    repo.pull_ref(1, head)
    more = repo.commit("Test one more", {"tests/test_one_more.py": "def test(): pass\n"})
    if merged_as.startswith("Merge pull request"):
        repo.pull_ref(2, more)
    repo.git("checkout", "-q", "main")
    repo.commit("Unrelated", {"README": "widget\n"})
    repo.git("merge", "-q", "--no-ff", "one", "-m", merged_as)
    merge = repo.git("rev-parse", "HEAD")
    result = mine(GitSource(repo.path, repo="acme/widget"), tmp_path / "out", MineOptions(allow_no_issue=True))
    rejection = next(r for r in result.funnel.rejections if r.pull_number == 1)
    assert rejection.reason == "not_merged"
    if merged_as.startswith("Merge pull request"):
        assert [task.pull_number for task in result.new_tasks] == [2]
        assert rejection.detail == f"its head {head[:12]} landed as part of PR #2"
    else:
        assert result.new_tasks == []
        assert rejection.detail == (f"head {head[:12]} is in main's history (brought there by {merge[:12]}, "
                                    f"\"Merge branch 'one'\"), but no merge, squash or fast-forward of it can be told apart")


def test_a_fast_forwarded_merge_head_is_the_landing(tmp_path):
    """A maintainer merges the maintenance branch locally, opens PR #2 from that merge and then
    fast-forwards main onto it: the merge is PR #2's landing, based where main stood."""
    repo = Repo.create(tmp_path / "ffmerge")
    repo.commit("Initial commit", {"src/widget/__init__.py": "", "tests/test_a.py": ""})
    repo.git("checkout", "-q", "-b", "1.0.x")
    repo.fix("patchy", "Fix patchy on 1.0.x")
    repo.git("checkout", "-q", "main")
    before = repo.commit("Unrelated work on main", {"src/widget/other.py": "OTHER = 1\n"})
    repo.git("merge", "-q", "--no-ff", "1.0.x", "-m", "Merge branch '1.0.x'")
    merge = repo.git("rev-parse", "HEAD")
    repo.pull_ref(2, merge)
    result = mine(GitSource(repo.path, repo="acme/widget"), tmp_path / "out", MineOptions(allow_no_issue=True))
    assert result.funnel.rejections == []
    [task] = result.new_tasks
    assert task.pull_number == 2
    assert task.base_commit == repo.merge_base(before, repo.git("rev-parse", "1.0.x"))
    assert "src/widget/patchy.py" in task.patch and "tests/test_patchy.py" in task.test_patch
    assert "other.py" not in task.patch
