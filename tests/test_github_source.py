"""GitHubSource against a real local HTTP server speaking GitHub's API (tests/fake_github.py).

No mocks: PyGithub, requests-cache and git do their real network work against FakeGitHub, and
the repositories are real git repositories built in temporary directories.
"""

from __future__ import annotations

import json
import re
import socket
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import git
import pytest
from fake_github import FakeGitHub, rest_comment, rest_issue, rest_pull, synthetic_repository

from repo2env.errors import SourceError
from repo2env.mine.github import (
    GitHubSource,
    default_clone_url,
    default_graphql_url,
    rate_limit_delay,
)
from repo2env.mine.source import PullRequest

REPO = "acme/widgets"
TOKEN = "ghp_test_token_0123456789"
AUTHOR = {
    "GIT_AUTHOR_NAME": "Dev",
    "GIT_AUTHOR_EMAIL": "dev@example.com",
    "GIT_COMMITTER_NAME": "Dev",
    "GIT_COMMITTER_EMAIL": "dev@example.com",
}


# -- a small real repository with pull requests ------------------------------------------------


@dataclass(frozen=True)
class PullSpec:
    number: int
    title: str
    body: str
    created_at: str
    commits: tuple[tuple[str, str], ...]  #: (message, date)
    closed_at: str
    merged: bool


PULLS = (
    PullSpec(
        2,
        "Fix crash on empty input",
        "Fixes #1.\n\nAlso adds a test.",
        "2024-01-02T12:00:00Z",
        (("Add a failing test", "2024-01-02T10:00:00Z"), ("Handle empty input", "2024-01-02T11:00:00Z")),
        "2024-01-03T09:00:00Z",
        True,
    ),
    # A closing keyword pointing at a PR: GitHub links nothing.
    PullSpec(
        3,
        "Follow-up",
        "Fixes #2 properly.",
        "2024-01-04T10:00:00Z",
        (("Tidy the fix", "2024-01-04T09:30:00Z"),),
        "2024-01-04T12:00:00Z",
        True,
    ),
    PullSpec(
        5,
        "Try another approach",
        "Closes #4",
        "2024-01-05T10:00:00Z",
        (("Experiment", "2024-01-05T09:00:00Z"),),
        "2024-01-06T10:00:00Z",
        False,
    ),
    PullSpec(
        8,
        "Support unicode names",
        "This resolves #7",
        "2024-01-07T10:00:00Z",
        (("Accept unicode", "2024-01-07T08:00:00Z"),),
        "2024-01-08T10:00:00Z",
        True,
    ),
)
ISSUES = {
    1: ("widgets crash on empty input", "2024-01-01T09:00:00Z", "2024-01-03T09:00:00Z"),
    4: ("slow on large input", "2024-01-04T09:00:00Z", None),
    7: ("unicode names rejected", "2024-01-06T09:00:00Z", "2024-01-08T10:00:00Z"),
}


@dataclass(frozen=True)
class SmallRepository:
    data: dict[str, Any]
    bare: Path
    heads: dict[int, str]
    merges: dict[int, str]


def _commit(repo: git.Repo, message: str, date: str, *args: str) -> str:
    repo.git.commit(
        "-q", "-m", message, *args, env=AUTHOR | {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    )
    return repo.head.commit.hexsha


def _build_small_repository(root: Path) -> SmallRepository:
    work = git.Repo.init(root / "work", initial_branch="main")
    (root / "work" / "widgets.py").write_text("def widget(items):\n    return items[0]\n")
    work.git.add("-A")
    _commit(work, "Initial commit", "2024-01-01T08:00:00Z")
    heads: dict[int, str] = {}
    merges: dict[int, str] = {}
    bases: dict[int, str] = {}
    for spec in PULLS:
        bases[spec.number] = work.head.commit.hexsha
        work.git.checkout("-q", "-b", f"topic-{spec.number}")
        for index, (message, date) in enumerate(spec.commits):
            (root / "work" / f"change_{spec.number}_{index}.txt").write_text(message)
            work.git.add("-A")
            heads[spec.number] = _commit(work, message, date)
        work.git.checkout("-q", "main")
        if spec.merged:
            date = spec.closed_at
            work.git.merge(
                "-q",
                "--no-ff",
                f"topic-{spec.number}",
                "-m",
                f"Merge pull request #{spec.number}",
                env=AUTHOR | {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date},
            )
            merges[spec.number] = work.head.commit.hexsha
    bare = git.Repo.clone_from(root / "work", root / "bare.git", bare=True)
    for number, sha in heads.items():
        bare.git.update_ref(f"refs/pull/{number}/head", sha)

    issues = [
        rest_issue(REPO, n, title=t, body=f"Steps to reproduce issue {n}.", created_at=c, closed_at=x)
        for n, (t, c, x) in ISSUES.items()
    ]
    pulls = []
    for spec in PULLS:
        merged_at = spec.closed_at if spec.merged else None
        pulls.append(
            rest_pull(
                REPO,
                spec.number,
                title=spec.title,
                body=spec.body,
                created_at=spec.created_at,
                head_sha=heads[spec.number],
                base_sha=bases[spec.number],
                merged_at=merged_at,
                merge_commit_sha=merges.get(spec.number, "0" * 40),
                closed_at=spec.closed_at,
            )
        )
        issues.append(
            rest_issue(
                REPO,
                spec.number,
                title=spec.title,
                body=spec.body,
                created_at=spec.created_at,
                closed_at=spec.closed_at,
                is_pull_request=True,
                pull_merged_at=merged_at,
            )
        )
    comments = [
        rest_comment(
            REPO, 1, 101, body="Same here on 2.0.", author="alice", created_at="2024-01-01T10:00:00Z"
        ),
        rest_comment(
            REPO, 1, 102, body="Only with an empty list.", author="bob", created_at="2024-01-01T11:00:00Z"
        ),
        rest_comment(
            REPO, 7, 701, body="Names like Zoë fail.", author="zoe", created_at="2024-01-06T10:00:00Z"
        ),
        rest_comment(REPO, 2, 201, body="LGTM", author="carol", created_at="2024-01-02T13:00:00Z"),
    ]
    data = {"repository": REPO, "issues": issues, "pulls": pulls, "comments": comments}
    return SmallRepository(data=data, bare=root / "bare.git", heads=heads, merges=merges)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> SmallRepository:
    return _build_small_repository(tmp_path_factory.mktemp("small"))


@pytest.fixture
def fake(small: SmallRepository) -> Iterator[FakeGitHub]:
    with FakeGitHub(small.data, tokens={TOKEN}, git_path=small.bare) as server:
        yield server


def _source(server: FakeGitHub, workdir: Path, **options: Any) -> GitHubSource:
    options.setdefault("token", TOKEN)
    return GitHubSource(REPO, workdir=workdir, api_url=server.api_url, **options)


def _pulls(source: GitHubSource) -> dict[int, PullRequest]:
    return {pull.number: pull for pull in source.pulls()}


# -- GraphQL mode ----------------------------------------------------------------------------------


def test_graphql_lists_merged_pulls_with_commits_and_closing_issues(fake: FakeGitHub, small, tmp_path):
    source = _source(fake, tmp_path)
    pulls = list(source.pulls())

    assert source.mode == "graphql"
    assert [p.number for p in pulls] == [8, 3, 2], "merged only, newest first"
    by_number = {p.number: p for p in pulls}
    fix = by_number[2]
    assert fix.merged and fix.merged_at == "2024-01-03T09:00:00Z"
    assert fix.merge_commit == small.merges[2]
    assert fix.head_sha == small.heads[2]
    assert fix.base_ref == "main"
    assert fix.linked_issues == (1,)
    assert fix.commit_messages == ("Add a failing test\n", "Handle empty input\n")
    assert fix.first_commit_at == "2024-01-02T10:00:00Z"
    assert by_number[3].linked_issues == (), "a closing keyword aimed at a PR links nothing"
    assert by_number[8].linked_issues == (7,)
    assert fake.count(method="POST", path="/graphql") == 1


def test_graphql_issues_come_from_the_pages_and_others_from_rest(fake: FakeGitHub, tmp_path):
    source = _source(fake, tmp_path)
    list(source.pulls())
    calls = source.api_calls

    issue = source.issue(1)
    assert issue is not None and issue.title == "widgets crash on empty input" and not issue.is_pull_request
    assert [(c.author, c.body) for c in issue.comments] == [
        ("alice", "Same here on 2.0."),
        ("bob", "Only with an empty list."),
    ]
    assert source.api_calls == calls, "linked issues arrive with the PR pages"

    unlinked = source.issue(4)
    assert unlinked is not None and unlinked.title == "slow on large input" and unlinked.comments == ()
    as_issue = source.issue(2)
    assert as_issue is not None and as_issue.is_pull_request
    assert [c.body for c in as_issue.comments] == ["LGTM"]
    assert source.issue(999) is None
    assert source.issue(999) is None
    assert fake.count(path="/repos/acme/widgets/issues/999") == 1, "a missing issue is asked for once"


def test_graphql_timeouts_halve_the_page(small: SmallRepository, tmp_path):
    with FakeGitHub(small.data, graphql_timeout_above=20) as server:
        source = _source(server, tmp_path, page_size=50)
        assert [p.number for p in source.pulls()] == [8, 3, 2]
        assert source.mode == "graphql"
        assert server.count(path="/graphql", status=502) == 2  # 50 -> 25 -> 12


def test_enterprise_urls_are_derived(small: SmallRepository, tmp_path):
    with FakeGitHub(small.data, enterprise=True) as server:
        source = GitHubSource(REPO, workdir=tmp_path, token=TOKEN, api_url=server.api_url)
        assert source.graphql_url == f"{server.url}/api/graphql"
        assert [p.number for p in source.pulls()] == [8, 3, 2]
        assert source.mode == "graphql"
        assert server.count(path="/api/v3/repos/acme/widgets") == 1


def test_default_urls():
    assert default_graphql_url("https://api.github.com") == "https://api.github.com/graphql"
    assert default_graphql_url("https://ghe.example.com/api/v3/") == "https://ghe.example.com/api/graphql"
    assert default_clone_url("https://api.github.com", REPO) == "https://github.com/acme/widgets.git"
    assert (
        default_clone_url("https://ghe.example.com/api/v3", REPO)
        == "https://ghe.example.com/acme/widgets.git"
    )


# -- REST fallback -------------------------------------------------------------------------------


def test_rest_fallback_lists_closed_pulls_and_bulk_issues(small: SmallRepository, tmp_path):
    with FakeGitHub(small.data, tokens={TOKEN}, graphql=False) as server:
        source = _source(server, tmp_path)
        pulls = list(source.pulls())

        assert source.mode == "rest"
        assert "404" in (source.graphql_unavailable or "")
        assert [p.number for p in pulls] == [8, 5, 3, 2]
        by_number = {p.number: p for p in pulls}
        assert not by_number[5].merged and by_number[5].merge_commit is None
        assert by_number[2].merge_commit == small.merges[2] and by_number[2].head_sha == small.heads[2]
        assert all(p.linked_issues is None and p.commit_messages == () for p in pulls)

        seven = source.issue(7)
        assert seven is not None and [c.author for c in seven.comments] == ["zoe"]
        pull_as_issue = source.issue(2)
        assert pull_as_issue is not None and pull_as_issue.is_pull_request
        assert source.issue(4) is not None and source.issue(999) is None
        assert server.count(path="/repos/acme/widgets/issues") == 1
        assert server.count(path="/repos/acme/widgets/issues/comments") == 1
        assert server.count(path="/repos/acme/widgets/issues/7") == 0, "no call per issue"
        assert server.count(path="/repos/acme/widgets/pulls/*") == 0, "no call per PR"


def test_enterprise_schema_without_closing_references_falls_back_to_rest(small: SmallRepository, tmp_path):
    with FakeGitHub(small.data, graphql_missing_fields=("closingIssuesReferences",)) as server:
        source = _source(server, tmp_path)
        assert [p.number for p in source.pulls()] == [8, 5, 3, 2]
        assert source.mode == "rest"
        assert "Field 'closingIssuesReferences' doesn't exist" in (source.graphql_unavailable or "")


def test_without_token_rest_is_used_without_trying_graphql(small: SmallRepository, tmp_path, monkeypatch):
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    with FakeGitHub(small.data) as server:
        source = GitHubSource(REPO, workdir=tmp_path, api_url=server.api_url)
        assert [p.number for p in source.pulls()] == [8, 5, 3, 2]
        assert source.mode == "rest"
        assert server.count(path="/graphql") == 0


def test_token_defaults_to_the_environment(fake: FakeGitHub, tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    source = GitHubSource(REPO, workdir=tmp_path, api_url=fake.api_url)
    assert [p.number for p in source.pulls()] == [8, 3, 2]
    assert source.mode == "graphql"


# -- conditional requests ------------------------------------------------------------------------


@pytest.mark.parametrize("graphql", [True, False], ids=["graphql", "rest"])
def test_second_run_costs_only_304s(small: SmallRepository, tmp_path, graphql: bool):
    with FakeGitHub(small.data, tokens={TOKEN}, graphql=graphql) as server:
        first = _source(server, tmp_path)
        first_pulls = list(first.pulls())
        first_issues = [first.issue(n) for n in (1, 4, 7)]
        first.close()
        server.reset_requests()

        second = _source(server, tmp_path)
        assert list(second.pulls()) == first_pulls
        assert [second.issue(n) for n in (1, 4, 7)] == first_issues
        second.close()

        rest_gets = [r for r in server.requests if r.method == "GET"]
        assert rest_gets and all(r.status == 304 for r in rest_gets), rest_gets
        graphql_posts = server.count(method="POST")
        assert second.api_calls == len(server.requests)
        assert second.api_calls_charged == graphql_posts, "only GraphQL (uncacheable) is charged"


def test_http_cache_keeps_no_token(fake: FakeGitHub, tmp_path):
    source = _source(fake, tmp_path)
    list(source.pulls())
    source.issue(4)
    source.close()
    cache_files = list((tmp_path / "http-cache").iterdir())
    assert cache_files
    for file in cache_files:
        assert TOKEN.encode() not in file.read_bytes()
    with sqlite3.connect(tmp_path / "http-cache" / "github.sqlite") as database:
        tables = {row[0] for row in database.execute("select name from sqlite_master where type='table'")}
    assert "responses" in tables


# -- clone -----------------------------------------------------------------------------------------


def test_clone_has_pull_heads_and_is_reused(small: SmallRepository, tmp_path):
    with FakeGitHub(small.data) as server:
        source = _source(server, tmp_path, clone_url=str(small.bare))
        path = source.clone_path()
        assert path == tmp_path / "clone"
        clone = git.Repo(path)
        assert not clone.bare and clone.head.is_valid()
        for number, sha in small.heads.items():
            assert clone.commit(f"refs/pull/{number}/head").hexsha == sha
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".clone-")] == []

        bare = git.Repo(small.bare)
        bare.git.update_ref("refs/pull/99/head", small.heads[5])
        try:
            again = _source(server, tmp_path, clone_url=str(small.bare)).clone_path()
            assert git.Repo(again).commit("refs/pull/99/head").hexsha == small.heads[5]
        finally:
            bare.git.update_ref("-d", "refs/pull/99/head")


def test_clone_over_http_sends_the_token_but_never_stores_it(small: SmallRepository, tmp_path):
    with FakeGitHub(small.data, tokens={TOKEN}, private=True, git_path=small.bare) as server:
        source = _source(server, tmp_path)
        assert source.clone_url == f"{server.url}/acme/widgets.git"
        clone = git.Repo(source.clone_path())
        assert clone.commit("refs/pull/2/head").hexsha == small.heads[2]
        assert TOKEN not in (Path(clone.git_dir) / "config").read_text()
        assert server.count(path="/acme/widgets.git/*", status=200) > 0

        anonymous = GitHubSource(REPO, workdir=tmp_path / "anon", token="", api_url=server.api_url)
        with pytest.raises(SourceError, match=r"cannot clone http://127\.0\.0\.1:\d+/acme/widgets\.git"):
            anonymous.clone_path()
        assert not (tmp_path / "anon" / "clone").exists()
        assert [p for p in (tmp_path / "anon").iterdir() if p.name.startswith(".clone-")] == []


def test_token_is_not_sent_to_another_host(small: SmallRepository, tmp_path):
    with FakeGitHub(small.data, tokens={TOKEN}, private=True, git_path=small.bare) as server:
        other_host = server.url.replace("127.0.0.1", "localhost") + "/acme/widgets.git"
        source = _source(server, tmp_path, clone_url=other_host)
        with pytest.raises(SourceError, match="cannot clone"):
            source.clone_path()
        assert server.count(path="/acme/widgets.git/info/refs", status=401) >= 1, "refused, not unreachable"


# -- rate limits ---------------------------------------------------------------------------------


def test_rest_rate_limit_is_waited_out(small: SmallRepository, tmp_path):
    waits: list[str] = []
    with FakeGitHub(small.data, graphql=False, rate_limit=2, rate_reset_after_s=0.5) as server:
        source = _source(server, tmp_path, on_wait=waits.append)
        assert [p.number for p in source.pulls()] == [8, 5, 3, 2]
        assert source.issue(7) is not None
        assert server.count(status=403) >= 1
        assert waits and all(
            re.fullmatch(r"GitHub rate limit reached; waiting \d+ s until reset", w) for w in waits
        )


def test_graphql_rate_limit_is_waited_out(tmp_path):
    waits: list[str] = []
    data = synthetic_repository(REPO, pulls=12, unmerged_every=0)
    with FakeGitHub(data, rate_limit=2, rate_reset_after_s=0.5) as server:
        source = _source(server, tmp_path, on_wait=waits.append, page_size=5)
        assert len(list(source.pulls())) == 12
        assert source.mode == "graphql"
        assert server.count(method="POST", path="/graphql") == 4  # 3 pages + 1 refused
        assert len(waits) == 1


def test_rate_limit_beyond_the_cap_is_an_error(small: SmallRepository, tmp_path):
    waits: list[str] = []
    with FakeGitHub(small.data, graphql=False, rate_limit=1, rate_reset_after_s=30) as server:
        source = _source(server, tmp_path, on_wait=waits.append, max_wait_s=5)
        with pytest.raises(SourceError, match="GitHub rate limit reached; the reset is 3[0-2] s away"):
            list(source.pulls())
        assert waits == []


def test_rate_limit_delay_reads_githubs_signals():
    assert rate_limit_delay(200, {"X-RateLimit-Remaining": "0"}, "") is None
    assert rate_limit_delay(403, {"Retry-After": "7"}, "") == 7.0
    assert rate_limit_delay(403, {"x-ratelimit-remaining": "12"}, "Resource not accessible") is None
    assert rate_limit_delay(403, {}, "You have exceeded a secondary rate limit") == 60.0
    assert rate_limit_delay(429, {}, "") == 60.0


# -- errors ------------------------------------------------------------------------------------------


def test_unknown_repository(fake: FakeGitHub, tmp_path):
    source = GitHubSource("acme/nothing", workdir=tmp_path, token=TOKEN, api_url=fake.api_url)
    with pytest.raises(SourceError) as raised:
        list(source.pulls())
    assert str(raised.value) == (
        f"repository acme/nothing not found on {fake.url} (check the name; a private repository "
        "needs a token with access: --token or GITHUB_TOKEN)"
    )


def test_bad_token(fake: FakeGitHub, tmp_path):
    with pytest.raises(SourceError, match=r"^GitHub rejected the token \(401"):
        list(_source(fake, tmp_path, token="ghp_wrong").pulls())


def test_private_repository_without_token(small: SmallRepository, tmp_path, monkeypatch):
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    with FakeGitHub(small.data, tokens={TOKEN}, private=True) as server:
        with pytest.raises(SourceError, match="not found on .*a private repository needs a token"):
            list(GitHubSource(REPO, workdir=tmp_path, api_url=server.api_url).pulls())
        assert [p.number for p in _source(server, tmp_path).pulls()] == [8, 3, 2]


def test_empty_repository(tmp_path):
    empty_bare = git.Repo.init(tmp_path / "empty.git", bare=True)
    data = {"repository": REPO, "issues": [], "pulls": [], "comments": [], "empty": True}
    with FakeGitHub(data) as server:
        source = _source(server, tmp_path / "work", clone_url=empty_bare.git_dir)
        with pytest.raises(SourceError, match="^repository acme/widgets is empty"):
            list(source.pulls())
        with pytest.raises(SourceError, match="^repository acme/widgets is empty"):
            source.clone_path()
        assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["http-cache"]


def test_server_down(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    source = GitHubSource(REPO, workdir=tmp_path, token=TOKEN, api_url=f"http://127.0.0.1:{port}")
    with pytest.raises(
        SourceError, match=rf"^cannot connect to the GitHub API at http://127\.0\.0\.1:{port} "
    ):
        list(source.pulls())


# -- cost ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("graphql", [True, False], ids=["graphql", "rest"])
def test_calls_per_pull_on_500_pulls(tmp_path, graphql: bool):
    data = synthetic_repository(REPO, pulls=500)
    with FakeGitHub(data, graphql=graphql) as server:
        source = _source(server, tmp_path)
        pulls = list(source.pulls())
        for pull in pulls:
            for number in pull.linked_issues or (pull.number - 1,):
                assert source.issue(number) is not None
        assert len(pulls) == (429 if graphql else 500)
        calls_per_pull = source.api_calls / len(pulls)
        assert calls_per_pull < (0.03 if graphql else 0.06), calls_per_pull
        assert source.api_calls == len(server.requests)


# -- the demo repository ---------------------------------------------------------------------------


def test_demo_repository_through_the_api(request: pytest.FixtureRequest, tmp_path):
    demo = pytest.importorskip("repo2env.demo", reason="repo2env.demo (the demo repository) is not built yet")
    demo_repo = request.getfixturevalue("demo_repo")
    mirror = git.Repo.clone_from(str(demo_repo.path), tmp_path / "mirror.git", mirror=True)
    data = json.loads(Path(demo_repo.issues_path).read_text())
    truth = {pull.number: pull for pull in demo.DEMO_PULLS}
    merged = {number for number, pull in truth.items() if pull.merge_style != "unmerged"}
    with FakeGitHub(data, tokens={TOKEN}, git_path=Path(mirror.git_dir)) as server:
        repo = data["repository"]
        source = GitHubSource(
            repo, workdir=tmp_path / "graphql", token=TOKEN, api_url=server.api_url, clone_url=mirror.git_dir
        )
        graphql_pulls = list(source.pulls())
        assert source.mode == "graphql"
        assert {p.number for p in graphql_pulls} == merged
        for pull in graphql_pulls:
            assert set(pull.linked_issues or ()) == set(truth[pull.number].linked_issues), pull.number
            assert pull.commit_messages and pull.first_commit_at
            for number in pull.linked_issues or ():
                linked = source.issue(number)
                assert linked is not None and not linked.is_pull_request

        clone = git.Repo(source.clone_path())
        for pull in graphql_pulls:
            assert clone.commit(f"refs/pull/{pull.number}/head").hexsha == pull.head_sha
            assert pull.merge_commit and clone.commit(pull.merge_commit)

        server.graphql = False
        rest = GitHubSource(repo, workdir=tmp_path / "rest", token=TOKEN, api_url=server.api_url)
        rest_pulls = {p.number: p for p in rest.pulls()}
        assert rest.mode == "rest"
        assert set(rest_pulls) == set(truth)
        assert {n for n, p in rest_pulls.items() if p.merged} == merged
