"""The GitHub source itself: :class:`GitHubSource` pages through merged PRs and issues.

GraphQL pages first, the REST lists as the fallback (see :mod:`repo2env.mine.github` for what each
mode knows); the records come from :mod:`~repo2env.mine.github.records`, the HTTP session and the
git credentials from :mod:`~repo2env.mine.github.transport`, the clone from
:mod:`repo2env.mine.clone`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import github
import requests
from github.PaginatedList import PaginatedList

from repo2env.errors import InputError, SourceError
from repo2env.mine.clone import PULL_REFSPECS, clone_or_fetch
from repo2env.mine.github.records import comment_from_rest, issue_from_rest, pull_from_graphql, pull_from_rest
from repo2env.mine.github.transport import (
    DEFAULT_API_URL,
    SECONDARY_LIMIT_WAIT_S,
    ApiMeter,
    RateLimitWaiter,
    RawObject,
    api_session,
    default_clone_url,
    default_graphql_url,
    git_environment,
    github_message,
    origin,
    reset_delay,
    use_session,
)
from repo2env.mine.source import Comment, Issue, PullRequest
from repo2env.models import REPO_NAME_PATTERN

#: PRs per GraphQL page. Each PR brings up to 100 commits and 20 issues with 50 comments each;
#: 50 keeps a page far below GitHub's 500,000-node limit and its 10 s query timeout.
DEFAULT_PAGE_SIZE = 50
#: Server timeouts (502/504) halve the page down to this before giving up.
MIN_PAGE_SIZE = 5

_CLONE_HINT = "check the clone URL and your access; a private repository needs --token or GITHUB_TOKEN"

MERGED_PULL_REQUESTS_QUERY = """
query MergedPullRequests($owner: String!, $name: String!, $first: Int!, $after: String) {
  repository(owner: $owner, name: $name) {
    defaultBranchRef { name }
    pullRequests(states: MERGED, first: $first, after: $after,
                 orderBy: {field: CREATED_AT, direction: DESC}) {
      pageInfo { hasNextPage endCursor }
      nodes {
        number title body createdAt mergedAt
        mergeCommit { oid }
        headRefOid baseRefName
        commits(first: 100) { nodes { commit { message committedDate authoredDate } } }
        closingIssuesReferences(first: 20) {
          nodes {
            number title body createdAt
            repository { nameWithOwner }
            comments(first: 50) { nodes { body createdAt author { login } } }
          }
        }
      }
    }
  }
}
"""


class _GraphQLUnavailable(Exception):
    """The GraphQL endpoint refused the first query: use the REST fallback."""


class GitHubSource:
    """A GitHub repository's PRs and issues through PyGithub, plus a clone of its code.

    ``token`` defaults to ``$GITHUB_TOKEN``; without one only public repositories can be read and
    GraphQL (which needs a token) is skipped for the REST fallback. ``api_url`` is
    ``https://api.github.com`` or an Enterprise ``https://HOST/api/v3``; ``graphql_url`` and
    ``clone_url`` are derived from it unless given (``graphql_url`` must be on the same host).
    ``workdir`` holds the clone (``workdir/clone``) and the HTTP cache (``workdir/http-cache``).
    ``on_wait`` hears about every rate-limit wait before it starts; waits longer than
    ``max_wait_s`` raise :class:`SourceError` instead.

    After :meth:`pulls` has started, ``mode`` is ``"graphql"`` or ``"rest"`` and
    ``graphql_unavailable`` says why REST was used. ``api_calls`` counts every HTTP request to the
    API (304s included), ``api_calls_charged`` those GitHub counts against the quota.
    Not thread-safe: one source per thread.
    """

    def __init__(
        self,
        repo: str,
        *,
        workdir: Path,
        token: str | None = None,
        api_url: str = DEFAULT_API_URL,
        graphql_url: str | None = None,
        clone_url: str | None = None,
        on_wait: Callable[[str], None] | None = None,
        max_wait_s: float = 3600.0,
        page_size: int = DEFAULT_PAGE_SIZE,
        timeout_s: float = 30.0,
    ) -> None:
        if not REPO_NAME_PATTERN.fullmatch(repo):
            raise InputError(f"{repo!r} is not a GitHub repository name", hint="write it as owner/name")
        if not 1 <= page_size <= 100:
            raise InputError(f"page_size {page_size} is out of range", hint="GitHub serves 1 to 100 per page")
        self.repo = repo
        self.api_url = api_url.rstrip("/")
        self.graphql_url = graphql_url or default_graphql_url(self.api_url)
        if origin(self.graphql_url) != origin(self.api_url):
            raise InputError(
                f"the GraphQL URL {self.graphql_url} is not on the API's host {origin(self.api_url)}",
                hint="leave --graphql-url out to derive it from --api-url",
            )
        self.clone_url = clone_url or default_clone_url(self.api_url, repo)
        self.workdir = Path(workdir)
        self.mode: Literal["graphql", "rest"] | None = None
        self.graphql_unavailable: str | None = None
        self._token = (token if token is not None else os.environ.get("GITHUB_TOKEN")) or None
        self._page_size = page_size
        self._timeout_s = timeout_s
        self._meter = ApiMeter()
        self._waiter = RateLimitWaiter(on_wait, max_wait_s)
        self._github: github.Github | None = None
        self._default_branch: str | None = None
        self._issues: dict[int, Issue] = {}
        self._missing_issues: set[int] = set()
        self._all_issues_loaded = False
        self._clone: Path | None = None

    # -- the Source interface ----------------------------------------------------------------

    def pulls(self) -> Iterator[PullRequest]:
        """Every merged PR, newest first (GraphQL), or every closed PR with ``merged`` set (REST).

        Raises :class:`SourceError` for an unknown or inaccessible repository, a rejected token,
        an empty repository (GraphQL), an unreachable API or a rate-limit wait over the cap.
        """
        self._repository()
        first_page = self._first_graphql_page()
        if first_page is None:
            self.mode = "rest"
            yield from self._rest_pulls()
            return
        self.mode = "graphql"
        if first_page.get("defaultBranchRef") is None:
            raise SourceError(f"repository {self.repo} is empty", hint="it has no commits to mine")
        repository = first_page
        while True:
            connection = repository["pullRequests"]
            for node in connection["nodes"]:
                if node:
                    yield self._pull_from_graphql(node)
            page_info = connection["pageInfo"]
            if not page_info.get("hasNextPage"):
                return
            with self._translated_errors():
                repository = self._graphql_page(after=page_info["endCursor"])

    def issue(self, number: int) -> Issue | None:
        """Issue ``number`` with its comments; a PR comes back with ``is_pull_request=True``.

        Answers from the issues the GraphQL pages delivered; otherwise, after the REST listing
        of PRs, from one bulk download of every issue and comment; otherwise with two REST calls
        (``/issues/N`` and its comments). ``None`` when GitHub has no such issue.
        """
        if number in self._issues:
            return self._issues[number]
        if number in self._missing_issues:
            return None
        if self.mode == "rest":
            self._load_all_issues()
            return self._issues.get(number)
        return self._fetch_issue(number)

    def clone_path(self) -> Path:
        """``workdir/clone``: a clone of ``clone_url`` with ``refs/pull/*/head`` fetched.

        Reuses and fetches into an existing clone. A token goes to git as an ``http.extraheader``
        in the environment of the clone and fetch commands, never into ``.git/config``, and only
        to the host the API's own clone URL points at. A failed clone leaves nothing behind.
        """
        if self._clone is None:
            environment = git_environment(self._token, self.clone_url, self.api_url, self.repo)
            self._clone = clone_or_fetch(self.clone_url, self.workdir / "clone", name=self.repo, mirror=False,
                                         refspecs=PULL_REFSPECS, environment=environment, hint=_CLONE_HINT)
        return self._clone

    # -- counters and lifecycle ----------------------------------------------------------------

    @property
    def api_calls(self) -> int:
        """HTTP requests made to the API so far, 304s and rate-limited attempts included."""
        return self._meter.calls

    @property
    def api_calls_charged(self) -> int:
        """HTTP requests GitHub counts against the quota (``api_calls`` without the 304s)."""
        return self._meter.charged

    def close(self) -> None:
        """Close the HTTP connections and the cache database."""
        if self._github is not None:
            self._github.close()
            self._github = None

    def __enter__(self) -> GitHubSource:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- HTTP plumbing -------------------------------------------------------------------------

    def _client(self) -> github.Github:
        if self._github is None:
            cache_dir = self.workdir / "http-cache"
            cache_dir.mkdir(parents=True, exist_ok=True)
            session = api_session(cache_dir / "github.sqlite", self._meter, self._waiter)
            self._github = github.Github(
                base_url=self.api_url,
                auth=github.Auth.Token(self._token) if self._token else None,
                per_page=100,
                timeout=math.ceil(self._timeout_s),
                user_agent="repo2env",
                # Our session retries rate limits itself (and tells on_wait); serial reads need
                # no artificial spacing.
                retry=None,
                seconds_between_requests=None,
                seconds_between_writes=None,
            )
            use_session(self._github, session)
        return self._github

    @contextmanager
    def _translated_errors(self) -> Iterator[None]:
        """Turn PyGithub's and requests' exceptions into one-line :class:`SourceError` s."""
        try:
            yield
        except github.BadCredentialsException as error:
            raise self._bad_token() from error
        except github.UnknownObjectException as error:
            raise self._not_found() from error
        except github.GithubException as error:
            message = github_message(error)
            if error.status == 401:
                raise self._bad_token() from error
            if error.status == 403:
                raise SourceError(
                    f"GitHub denied access to {self.repo} (403: {message})",
                    hint="use a token that can read this repository: --token or GITHUB_TOKEN",
                ) from error
            raise SourceError(
                f"GitHub answered {error.status} for {self.repo}: {message}",
                hint="retry later; if it persists, check --api-url",
            ) from error
        except requests.exceptions.Timeout as error:
            raise SourceError(
                f"the GitHub API at {self.api_url} did not answer within {self._timeout_s:g} s",
                hint="retry later, or check --api-url",
            ) from error
        except requests.exceptions.ConnectionError as error:
            raise SourceError(
                f"cannot connect to the GitHub API at {self.api_url}",
                hint="check --api-url and the network",
            ) from error

    def _not_found(self) -> SourceError:
        return SourceError(
            f"repository {self.repo} not found on {self.api_url}",
            hint="check the name; a private repository needs a token with access: --token or GITHUB_TOKEN",
        )

    def _bad_token(self) -> SourceError:
        return SourceError(
            "GitHub rejected the token (401 Bad credentials)",
            hint="pass a valid token with --token or GITHUB_TOKEN, or none for a public repository",
        )

    def _repository(self) -> str:
        """Check the repository exists and is readable (one conditional GET); its default branch."""
        if self._default_branch is None:
            with self._translated_errors():
                self._default_branch = self._client().get_repo(self.repo).default_branch or "main"
        return self._default_branch

    def _rest_items(self, path: str, params: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        """Every item of a paginated REST list (100 per page) as GitHub's JSON."""
        items = iter(PaginatedList(RawObject, self._client().requester, path, params))
        while True:
            with self._translated_errors():
                item = next(items, None)
            if item is None:
                return
            yield item.raw_data

    # -- GraphQL -------------------------------------------------------------------------------

    def _first_graphql_page(self) -> dict[str, Any] | None:
        """The first page of merged PRs, or ``None`` (and ``graphql_unavailable`` set) for REST."""
        if not self._token:
            self.graphql_unavailable = "no token: GitHub's GraphQL API needs one"
            return None
        try:
            with self._translated_errors():
                return self._graphql_page(after=None)
        except _GraphQLUnavailable as reason:
            self.graphql_unavailable = str(reason)
            return None

    def _graphql_page(self, *, after: str | None) -> dict[str, Any]:
        """``repository`` of one ``MergedPullRequests`` answer.

        Rate limits are waited out; server timeouts halve the page size. On the first page
        (``after is None``) a refused endpoint or an unknown field raises ``_GraphQLUnavailable``.
        """
        owner, name = self.repo.split("/")
        waited = 0.0
        while True:
            variables = {"owner": owner, "name": name, "first": self._page_size, "after": after}
            request = {"query": MERGED_PULL_REQUESTS_QUERY, "variables": variables}
            try:
                headers, answer = self._client().requester.requestJsonAndCheck(
                    "POST", self.graphql_url, input=request
                )
            except github.GithubException as error:
                if error.status in (502, 503, 504) and self._page_size > MIN_PAGE_SIZE:
                    self._page_size = max(MIN_PAGE_SIZE, self._page_size // 2)
                    continue
                if error.status in (401, 403, 404) and after is None:
                    raise _GraphQLUnavailable(
                        f"{self.graphql_url} answered {error.status} ({github_message(error)})"
                    ) from error
                raise
            errors = answer.get("errors") or []
            if not errors:
                return answer["data"]["repository"]
            kinds = {error.get("type") for error in errors}
            if "RATE_LIMITED" in kinds:
                delay = reset_delay(headers) or SECONDARY_LIMIT_WAIT_S
                waited = self._waiter.wait(delay, waited)
                continue
            if "NOT_FOUND" in kinds:
                raise self._not_found()
            message = "; ".join(str(error.get("message", error)) for error in errors)
            if after is None:
                raise _GraphQLUnavailable(f"GraphQL query refused: {message}")
            raise SourceError(f"GitHub's GraphQL API failed for {self.repo}: {message}", hint="retry later")

    def _pull_from_graphql(self, node: dict[str, Any]) -> PullRequest:
        pull, issues = pull_from_graphql(node, self.repo, self._repository())
        self._issues.update((issue.number, issue) for issue in issues)
        return pull

    # -- REST ------------------------------------------------------------------------------------

    def _rest_pulls(self) -> Iterator[PullRequest]:
        default_branch = self._repository()
        params = {"state": "closed", "sort": "created", "direction": "desc"}
        for raw in self._rest_items(f"/repos/{self.repo}/pulls", params):
            yield pull_from_rest(raw, default_branch)

    def _load_all_issues(self) -> None:
        """Every issue (PRs included) and every comment, in two bulk paginated lists."""
        if self._all_issues_loaded:
            return
        comments: dict[int, list[Comment]] = {}
        for raw in self._rest_items(
            f"/repos/{self.repo}/issues/comments", {"sort": "created", "direction": "asc"}
        ):
            number = int(str(raw["issue_url"]).rstrip("/").rsplit("/", 1)[1])
            comments.setdefault(number, []).append(comment_from_rest(raw))
        for raw in self._rest_items(f"/repos/{self.repo}/issues", {"state": "all"}):
            issue = issue_from_rest(raw, comments.get(int(raw["number"]), []))
            self._issues.setdefault(issue.number, issue)
        self._all_issues_loaded = True

    def _fetch_issue(self, number: int) -> Issue | None:
        self._repository()
        raw: dict[str, Any] | None = None
        with self._translated_errors():
            try:
                _, raw = self._client().requester.requestJsonAndCheck(
                    "GET", f"/repos/{self.repo}/issues/{number}"
                )
            except github.GithubException as error:
                # 404: no such issue; 410: deleted. The repository itself was checked above.
                if error.status not in (404, 410):
                    raise
        if raw is None:
            self._missing_issues.add(number)
            return None
        comments: list[Comment] = []
        if raw.get("comments", 1):
            comments = [
                comment_from_rest(c)
                for c in self._rest_items(f"/repos/{self.repo}/issues/{number}/comments")
            ]
        issue = issue_from_rest(raw, comments)
        self._issues[number] = issue
        return issue
