"""Mining the demo repository from local history: every PR lands in its declared bucket."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import git
import pytest

from repo2env.errors import SourceError
from repo2env.jsonl import read_tasks
from repo2env.mine.git import GitSource
from repo2env.mine.history import GitHistory
from repo2env.mine.miner import MineOptions, mine
from repo2env.mine.split import classify_path
from repo2env.models import Task


@pytest.fixture(scope="module")
def mined(demo_repo, tmp_path_factory):
    out = tmp_path_factory.mktemp("mined")
    result = mine(GitSource(demo_repo.path, issues_path=demo_repo.issues_path), out)
    return result, {task.pull_number: task for task in read_tasks(result.tasks_path)}


def test_every_demo_pr_lands_in_its_declared_bucket(demo_repo, mined):
    result, tasks = mined
    rejected = {rejection.pull_number: rejection.reason for rejection in result.funnel.rejections}
    for pull in demo_repo.pulls:
        if pull.expected_bucket == "kept":
            assert pull.number in tasks, f"PR #{pull.number} should be kept, was {rejected.get(pull.number)}"
        else:
            assert rejected.get(pull.number) == pull.expected_bucket, f"PR #{pull.number}"
    assert set(tasks) | set(rejected) == {pull.number for pull in demo_repo.pulls}
    counts = result.funnel.counts
    assert counts["scanned"] == len(demo_repo.pulls)
    assert counts["kept"] == len(tasks) == sum(pull.expected_bucket == "kept" for pull in demo_repo.pulls)
    on_disk = json.loads(result.funnel_path.read_text())
    assert on_disk["counts"]["kept"] == counts["kept"]


def test_kept_tasks_have_linked_issues_base_commits_and_split_patches(demo_repo, mined):
    _, tasks = mined
    repo = git.Repo(demo_repo.path)
    for pull in demo_repo.pulls:
        if pull.expected_bucket != "kept":
            continue
        task = tasks[pull.number]
        assert task.instance_id == f"repo2env-demo__textkit-{pull.number}"
        assert tuple(task.issue_numbers) == pull.linked_issues
        head = repo.commit(f"refs/pull/{pull.number}/head")
        if pull.merge_style == "merge":
            merge = repo.commit(task.merge_commit)
            assert task.base_commit == repo.merge_base(merge.parents[0], head)[0].hexsha
        else:
            assert task.base_commit == repo.commit(task.merge_commit).parents[0].hexsha
        for patch, kind in ((task.patch, "source"), (task.test_patch, "test")):
            paths = [line.split(" b/")[-1] for line in patch.splitlines() if line.startswith("diff --git")]
            assert paths and all(classify_path(path) == kind for path in paths), (pull.number, paths)
        assert task.problem_statement.strip()
        assert task.version in {"0.1", "0.2", "0.3"}
        # Both patches apply at the base commit, on a fresh checkout.
        _assert_applies(demo_repo.path, task)


def _assert_applies(repo_path: Path, task: Task) -> None:
    worktree = Path(repo_path).parent / f"wt-{task.pull_number}"
    subprocess.run(["git", "-C", str(repo_path), "worktree", "add", "--detach", "-f", str(worktree), task.base_commit],
                   check=True, capture_output=True)
    try:
        for patch in (task.patch, task.test_patch):
            subprocess.run(["git", "apply", "--check", "-"], cwd=worktree, input=patch, text=True, check=True)
    finally:
        subprocess.run(["git", "-C", str(repo_path), "worktree", "remove", "--force", str(worktree)], check=True)


def test_changelog_goes_to_aux_patch_and_leaks_are_stripped(demo_repo, mined):
    _, tasks = mined
    with_changelog = [task for task in tasks.values() if "CHANGELOG" in task.aux_patch]
    assert with_changelog, "the demo has a PR with a changelog entry"
    assert all("CHANGELOG" not in task.patch + task.test_patch for task in tasks.values())
    leaking = [pull for pull in demo_repo.pulls if pull.leaks_fix]
    assert leaking
    for pull in leaking:
        task = tasks[pull.number]
        assert task.leak_score >= 0.5
        assert "/commit/" not in task.problem_statement
        added = [line[1:].strip() for line in task.patch.splitlines()
                 if line.startswith("+") and not line.startswith("+++") and len(line.strip()) > 12]
        assert not [line for line in added if line in task.problem_statement], "the fix must not stay in the task"
    innocent = [tasks[p.number] for p in demo_repo.pulls if p.expected_bucket == "kept" and not p.leaks_fix]
    assert all(task.leak_score < 0.5 for task in innocent)


def test_hints_are_comments_made_before_the_first_commit(demo_repo, mined):
    _, tasks = mined
    payload = json.loads(Path(demo_repo.issues_path).read_text())
    pulls = {pull["number"]: pull for pull in payload["pulls"]}
    for task in tasks.values():
        comments = [c for c in payload["comments"] if int(c["issue_url"].rsplit("/", 1)[1]) in task.issue_numbers]
        history = GitHistory(demo_repo.path)
        first_commit = min(c.author_date for c in history.commits_between(task.base_commit, pulls[task.pull_number]["head"]["sha"]))
        for comment in comments:
            body_start = comment["body"].strip().splitlines()[0][:30]
            if comment["created_at"] < first_commit.replace("+00:00", "Z"):
                assert body_start in task.hints_text
            else:
                assert body_start not in task.hints_text


def test_rerun_resumes_without_writing_twice(demo_repo, tmp_path):
    source = GitSource(demo_repo.path, issues_path=demo_repo.issues_path)
    first = mine(source, tmp_path, MineOptions(limit=2))
    assert len(first.new_tasks) == 2
    second = mine(source, tmp_path)
    ids = [task.instance_id for task in read_tasks(tmp_path / "tasks.jsonl")]
    assert len(ids) == len(set(ids))
    assert second.funnel.counts["already_mined"] == 2
    third = mine(source, tmp_path)
    assert third.new_tasks == []
    assert len(read_tasks(tmp_path / "tasks.jsonl")) == len(ids)


def test_selection_options(demo_repo, tmp_path):
    source = GitSource(demo_repo.path, issues_path=demo_repo.issues_path)
    kept = [pull.number for pull in demo_repo.pulls if pull.expected_bucket == "kept"]
    only = mine(source, tmp_path / "one", MineOptions(pull_numbers=frozenset({kept[0]})))
    assert [task.pull_number for task in only.new_tasks] == [kept[0]]
    assert only.funnel.counts["not_selected"] == len(demo_repo.pulls) - 1
    no_issue = [pull.number for pull in demo_repo.pulls if pull.expected_bucket == "no_linked_issue"]
    relaxed = mine(source, tmp_path / "relaxed", MineOptions(allow_no_issue=True))
    relaxed_ids = {task.pull_number for task in relaxed.new_tasks}
    assert set(no_issue) <= relaxed_ids
    for task in relaxed.new_tasks:
        if task.pull_number in no_issue:
            assert task.issue_numbers == [] and task.problem_statement.strip()


def test_local_source_from_a_url_clones_with_pull_refs(demo_repo, tmp_path):
    bare = tmp_path / "textkit.git"
    subprocess.run(["git", "clone", "-q", "--mirror", str(demo_repo.path), str(bare)], check=True)
    source = GitSource(f"file://{bare}", issues_path=demo_repo.issues_path, workdir=tmp_path / "work")
    result = mine(source, tmp_path / "out")
    assert result.funnel.counts["kept"] == sum(pull.expected_bucket == "kept" for pull in demo_repo.pulls)


def test_local_source_clone_is_fetched_into_and_never_mined_for_another_url(demo_repo, tmp_path):
    bare = tmp_path / "textkit.git"
    subprocess.run(["git", "clone", "-q", "--mirror", str(demo_repo.path), str(bare)], check=True)
    work = tmp_path / "work"
    first = GitSource(f"file://{bare}", workdir=work)
    head = first.history.repo.head.commit.hexsha
    # The remote gains a PR ref and loses a branch: the next run's clone is fetched and pruned.
    subprocess.run(["git", "-C", str(bare), "update-ref", "refs/pull/999/head", head], check=True)
    subprocess.run(["git", "-C", str(bare), "branch", "-q", "gone", head], check=True)
    GitSource(f"file://{bare}", workdir=work)
    subprocess.run(["git", "-C", str(bare), "branch", "-q", "-D", "gone"], check=True)
    again = GitSource(f"file://{bare}", workdir=work)
    assert again.path == first.path == work / "clone"
    assert again.history.repo.commit("refs/pull/999/head").hexsha == head
    assert "gone" not in [branch.name for branch in again.history.repo.branches]

    other = tmp_path / "other.git"
    subprocess.run(["git", "clone", "-q", "--mirror", str(bare), str(other)], check=True)
    with pytest.raises(SourceError, match=r"is a clone of file://.*textkit\.git, not of file://.*other\.git"):
        GitSource(f"file://{other}", workdir=work)


def test_repo_url_is_mirrored_into_the_cache(demo_repo, tmp_path, monkeypatch):
    from repo2env.mine.open import open_source

    bare = tmp_path / "textkit.git"
    subprocess.run(["git", "clone", "-q", "--mirror", str(demo_repo.path), str(bare)], check=True)
    monkeypatch.setenv("REPO2ENV_CACHE", str(tmp_path / "cache"))
    source = open_source(f"file://{bare}", name="acme/textkit")
    assert isinstance(source, GitSource) and source.repo == "acme/textkit"
    assert source.clone_path().parent.parent == tmp_path / "cache" / "urls"
    assert git.Repo(source.clone_path()).bare


def test_local_source_failed_clone_leaves_nothing_and_hides_credentials(tmp_path):
    work = tmp_path / "work"
    with pytest.raises(SourceError, match=r"cannot clone https://127\.0\.0\.1:1/acme/widgets\.git: ") as raised:
        GitSource("https://user:s3cret@127.0.0.1:1/acme/widgets.git", workdir=work)
    assert "s3cret" not in str(raised.value) and "s3cret" not in str(raised.value.hint)
    assert list(work.iterdir()) == []


def test_without_issues_file_prs_are_named_after_the_directory(demo_repo, tmp_path):
    source = GitSource(demo_repo.path)
    assert source.repo == "local/repo"
    result = mine(source, tmp_path, MineOptions(allow_no_issue=True))
    assert result.funnel.counts["kept"] >= 1
    assert all(task.repo == "local/repo" for task in result.new_tasks)


@pytest.mark.parametrize("kind", ["missing", "not_git", "empty"])
def test_bad_repositories_are_clear_errors(tmp_path, kind):
    target = tmp_path / "target"
    if kind == "not_git":
        target.mkdir()
    elif kind == "empty":
        git.Repo.init(target)
    expected = {"missing": "no such path", "not_git": "is not a git repository", "empty": "is empty"}[kind]
    with pytest.raises(SourceError, match=expected):
        GitSource(target)


def test_repository_without_qualifying_prs_is_not_an_error(tmp_path):
    repo = git.Repo.init(tmp_path / "plain", initial_branch="main")
    (tmp_path / "plain" / "a.py").write_text("x = 1\n")
    repo.index.add(["a.py"])
    repo.index.commit("initial")
    result = mine(GitSource(repo.working_tree_dir), tmp_path / "out")
    assert result.new_tasks == []
    assert (tmp_path / "out" / "tasks.jsonl").read_text() == ""
    assert json.loads((tmp_path / "out" / "funnel.json").read_text())["counts"]["scanned"] == 0


@pytest.mark.parametrize("graphql", [True, False], ids=["graphql", "rest"])
def test_demo_mined_through_the_github_api_matches_local_history(demo_repo, mined, tmp_path, graphql):
    """The same demo, served by a real local HTTP server speaking GitHub's API, mines the same tasks."""
    from fake_github import FakeGitHub

    from repo2env.mine.github import GitHubSource

    _, local_tasks = mined
    mirror = git.Repo.clone_from(str(demo_repo.path), tmp_path / "mirror.git", mirror=True)
    data = json.loads(Path(demo_repo.issues_path).read_text())
    with FakeGitHub(data, tokens={"t0ken"}, git_path=Path(mirror.git_dir), graphql=graphql) as server:
        source = GitHubSource(data["repository"], token="t0ken", api_url=server.api_url, workdir=tmp_path / "gh")
        result = mine(source, tmp_path / "out")
    assert source.mode == ("graphql" if graphql else "rest")
    tasks = {task.pull_number: task for task in read_tasks(result.tasks_path)}
    assert set(tasks) == set(local_tasks)
    for number, task in tasks.items():
        local = local_tasks[number]
        assert (task.base_commit, task.patch, task.test_patch) == (local.base_commit, local.patch, local.test_patch)
        assert task.issue_numbers == local.issue_numbers
        assert task.problem_statement == local.problem_statement
    rejected = {rejection.pull_number: rejection.reason for rejection in result.funnel.rejections}
    for pull in demo_repo.pulls:
        if pull.expected_bucket not in ("kept", "not_merged"):
            assert rejected[pull.number] == pull.expected_bucket
    if not graphql:  # GraphQL lists merged PRs only
        assert rejected[next(p.number for p in demo_repo.pulls if p.expected_bucket == "not_merged")] == "not_merged"


def test_limit_counts_only_what_was_written(demo_repo, tmp_path):
    result = mine(GitSource(demo_repo.path, issues_path=demo_repo.issues_path), tmp_path, MineOptions(limit=3))
    written = read_tasks(result.tasks_path)
    assert len(written) == result.funnel.counts["kept"] == 3
    assert result.funnel.counts["applies"] == 3 + result.funnel.counts.get("over_limit", 0)
