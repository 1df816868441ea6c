"""Merged pull requests from GitHub's API (github.com or GitHub Enterprise): :class:`GitHubSource`.

Cost is the design constraint: GitHub allows 5,000 REST calls and 5,000 GraphQL points an hour,
and a repository can have tens of thousands of PRs. So:

* **GraphQL first.** One ``MergedPullRequests`` query returns a page of 50 merged PRs with their
  commits, the issues they close (``closingIssuesReferences``) and those issues' comments: the
  whole mining input for a page in one call. Issues that arrived this way are kept in memory and
  :meth:`GitHubSource.issue` answers from there.
* **REST fallback** when GraphQL is unavailable (no token, 401/403/404 on the endpoint, or an
  Enterprise server whose schema lacks a field): closed PRs, every issue and every comment come
  from three paginated bulk lists of 100 items per page, never one call per PR.
* **Conditional requests.** Every REST GET is stored on disk with its ETag
  (``workdir/http-cache``, through requests-cache) and revalidated with ``If-None-Match``, so a
  re-run costs 304s, which GitHub does not charge. GraphQL is a POST without ETags: not cached.
* **Rate limits are waited out**, not failed on: a 403/429 with ``X-RateLimit-Remaining: 0`` or
  ``Retry-After`` (or a GraphQL ``RATE_LIMITED`` error) sleeps until the reset and retries,
  telling ``on_wait`` first; a wait beyond ``max_wait_s`` is a :class:`SourceError`.

What each mode knows (the miner copes with both):

======================  =====================================  ====================================
field                   GraphQL                                REST fallback
======================  =====================================  ====================================
PRs listed              merged only (the funnel's not_merged   every closed PR, ``merged`` set
                        count stays 0)
``linked_issues``       closing references to issues of this   ``None``: the miner parses the texts
                        repository
``commit_messages``     the first 100 commits' messages        empty
``first_commit_at``     earliest authored date of those        ``None``
issue comments          the first 50 per linked issue          all of them
======================  =====================================  ====================================

``squashed`` is always ``False``: the API does not say how a PR was merged.
"""

from __future__ import annotations

import base64
import math
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import git
import github
import requests
import requests_cache
from github.GithubObject import NonCompletableGithubObject
from github.PaginatedList import PaginatedList
from requests.adapters import HTTPAdapter

from repo2env.errors import InputError, SourceError
from repo2env.mine.source import Comment, Issue, PullRequest

DEFAULT_API_URL = "https://api.github.com"
#: PRs per GraphQL page. Each PR brings up to 100 commits and 20 issues with 50 comments each;
#: 50 keeps a page far below GitHub's 500,000-node limit and its 10 s query timeout.
DEFAULT_PAGE_SIZE = 50
#: Server timeouts (502/504) halve the page down to this before giving up.
MIN_PAGE_SIZE = 5
#: GitHub's reset times are whole seconds of a clock that is not ours: wait a little past them.
RESET_MARGIN_S = 1.0
#: GitHub's advice for a secondary rate limit that names no time: wait at least a minute.
SECONDARY_LIMIT_WAIT_S = 60.0
#: The anonymous author GitHub shows for deleted accounts.
GHOST = "ghost"

_CLONE_HINT = "check the clone URL and your access; a private repository needs --token or GITHUB_TOKEN"
_REPO_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}")

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
        if not _REPO_NAME.fullmatch(repo):
            raise InputError(f"{repo!r} is not a GitHub repository name", hint="write it as owner/name")
        if not 1 <= page_size <= 100:
            raise InputError(f"page_size {page_size} is out of range", hint="GitHub serves 1 to 100 per page")
        self.repo = repo
        self.api_url = api_url.rstrip("/")
        self.graphql_url = graphql_url or default_graphql_url(self.api_url)
        if _origin(self.graphql_url) != _origin(self.api_url):
            raise InputError(
                f"the GraphQL URL {self.graphql_url} is not on the API's host {_origin(self.api_url)}",
                hint="leave --graphql-url out to derive it from --api-url",
            )
        self.clone_url = clone_url or default_clone_url(self.api_url, repo)
        self.workdir = Path(workdir)
        self.mode: Literal["graphql", "rest"] | None = None
        self.graphql_unavailable: str | None = None
        self._token = (token if token is not None else os.environ.get("GITHUB_TOKEN")) or None
        self._page_size = page_size
        self._timeout_s = timeout_s
        self._meter = _ApiMeter()
        self._waiter = _RateLimitWaiter(on_wait, max_wait_s)
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
            raise self._empty()
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
            self._clone = self._sync_clone()
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
            session = _api_session(cache_dir / "github.sqlite", self._meter, self._waiter)
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
            _use_session(self._github, session)
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
            message = _github_message(error)
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

    def _empty(self) -> SourceError:
        return SourceError(f"repository {self.repo} is empty", hint="it has no commits to mine")

    def _repository(self) -> str:
        """Check the repository exists and is readable (one conditional GET); its default branch."""
        if self._default_branch is None:
            with self._translated_errors():
                self._default_branch = self._client().get_repo(self.repo).default_branch or "main"
        return self._default_branch

    def _rest_items(self, path: str, params: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        """Every item of a paginated REST list (100 per page) as GitHub's JSON."""
        items = iter(PaginatedList(_RawObject, self._client().requester, path, params))
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
                        f"{self.graphql_url} answered {error.status} ({_github_message(error)})"
                    ) from error
                raise
            errors = answer.get("errors") or []
            if not errors:
                return answer["data"]["repository"]
            kinds = {error.get("type") for error in errors}
            if "RATE_LIMITED" in kinds:
                delay = _reset_delay(headers) or SECONDARY_LIMIT_WAIT_S
                waited = self._waiter.wait(delay, waited)
                continue
            if "NOT_FOUND" in kinds:
                raise self._not_found()
            message = "; ".join(str(error.get("message", error)) for error in errors)
            if after is None:
                raise _GraphQLUnavailable(f"GraphQL query refused: {message}")
            raise SourceError(f"GitHub's GraphQL API failed for {self.repo}: {message}", hint="retry later")

    def _pull_from_graphql(self, node: dict[str, Any]) -> PullRequest:
        commits = [entry["commit"] for entry in (node.get("commits") or {}).get("nodes") or [] if entry]
        dates = [c.get("authoredDate") or c.get("committedDate") for c in commits]
        known_dates = [d for d in dates if d]
        linked: list[int] = []
        for issue_node in (node.get("closingIssuesReferences") or {}).get("nodes") or []:
            if not issue_node:
                continue
            # A PR can close issues of other repositories; their numbers mean nothing here.
            owner_repo = (issue_node.get("repository") or {}).get("nameWithOwner") or self.repo
            if owner_repo.lower() != self.repo.lower():
                continue
            issue = _issue_from_graphql(issue_node)
            self._issues[issue.number] = issue
            if issue.number not in linked:
                linked.append(issue.number)
        merge_commit = node.get("mergeCommit") or {}
        return PullRequest(
            number=int(node["number"]),
            title=node.get("title") or "",
            body=node.get("body") or "",
            created_at=node["createdAt"],
            merged=True,
            merged_at=node.get("mergedAt"),
            merge_commit=merge_commit.get("oid"),
            head_sha=node.get("headRefOid"),
            base_ref=node.get("baseRefName") or self._repository(),
            commit_messages=tuple(c.get("message") or "" for c in commits),
            first_commit_at=min(known_dates, key=datetime.fromisoformat) if known_dates else None,
            linked_issues=tuple(linked),
        )

    # -- REST ------------------------------------------------------------------------------------

    def _rest_pulls(self) -> Iterator[PullRequest]:
        default_branch = self._repository()
        params = {"state": "closed", "sort": "created", "direction": "desc"}
        for raw in self._rest_items(f"/repos/{self.repo}/pulls", params):
            merged_at = raw.get("merged_at")
            yield PullRequest(
                number=int(raw["number"]),
                title=raw.get("title") or "",
                body=raw.get("body") or "",
                created_at=raw["created_at"],
                merged=merged_at is not None,
                merged_at=merged_at,
                # GitHub fills merge_commit_sha for unmerged PRs too (a test merge): not ours.
                merge_commit=raw.get("merge_commit_sha") if merged_at else None,
                head_sha=(raw.get("head") or {}).get("sha"),
                base_ref=(raw.get("base") or {}).get("ref") or default_branch,
                linked_issues=None,
            )

    def _load_all_issues(self) -> None:
        """Every issue (PRs included) and every comment, in two bulk paginated lists."""
        if self._all_issues_loaded:
            return
        comments: dict[int, list[Comment]] = {}
        for raw in self._rest_items(
            f"/repos/{self.repo}/issues/comments", {"sort": "created", "direction": "asc"}
        ):
            number = int(str(raw["issue_url"]).rstrip("/").rsplit("/", 1)[1])
            comments.setdefault(number, []).append(_comment_from_rest(raw))
        for raw in self._rest_items(f"/repos/{self.repo}/issues", {"state": "all"}):
            issue = _issue_from_rest(raw, comments.get(int(raw["number"]), []))
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
                _comment_from_rest(c)
                for c in self._rest_items(f"/repos/{self.repo}/issues/{number}/comments")
            ]
        issue = _issue_from_rest(raw, comments)
        self._issues[number] = issue
        return issue

    # -- git -------------------------------------------------------------------------------------

    def _sync_clone(self) -> Path:
        target = self.workdir / "clone"
        shown_url = _without_credentials(self.clone_url)
        environment = self._git_environment()
        if target.exists() and not (target / ".git").is_dir():
            raise SourceError(
                f"{target} exists but is not a git clone", hint="remove it or choose another workdir"
            )
        if target.exists():
            repo = git.Repo(target)
            origin_url = repo.remotes.origin.url if "origin" in repo.remotes else None
            if origin_url != self.clone_url:
                raise SourceError(
                    f"{target} is a clone of {_without_credentials(origin_url or '?')}, not of {shown_url}",
                    hint="choose another workdir for this repository",
                )
            self._fetch(repo, environment)
            if not repo.head.is_valid():
                raise self._empty()
            return target
        self.workdir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".clone-", dir=self.workdir))
        try:
            try:
                repo = git.Repo.clone_from(self.clone_url, staging, env=environment)
            except git.GitCommandError as error:
                raise SourceError(
                    f"cannot clone {shown_url}: {_git_reason(error)}",
                    hint=_CLONE_HINT,
                ) from error
            if not repo.head.is_valid():
                raise self._empty()
            self._fetch(repo, environment)
            repo.close()
            staging.rename(target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return target

    def _fetch(self, repo: git.Repo, environment: dict[str, str]) -> None:
        refspecs = ["+refs/heads/*:refs/remotes/origin/*", "+refs/pull/*/head:refs/pull/*/head"]
        try:
            repo.git.fetch("origin", *refspecs, env=environment)
        except git.GitCommandError as error:
            raise SourceError(
                f"cannot fetch from {_without_credentials(self.clone_url)}: {_git_reason(error)}",
                hint=_CLONE_HINT,
            ) from error

    def _git_environment(self) -> dict[str, str]:
        """Environment for git: no password prompts, and the token as a header where it belongs."""
        environment = {"GIT_TERMINAL_PROMPT": "0"}
        if not self._token or not _token_may_go_to(self.clone_url, self.api_url, self.repo):
            return environment
        # GIT_CONFIG_COUNT/KEY/VALUE configure this one command without touching .git/config and
        # keep the token out of the process list; extend any such config the caller already set.
        index = int(os.environ.get("GIT_CONFIG_COUNT") or 0)
        credentials = base64.b64encode(f"x-access-token:{self._token}".encode()).decode()
        environment |= {
            "GIT_CONFIG_COUNT": str(index + 1),
            f"GIT_CONFIG_KEY_{index}": "http.extraheader",
            f"GIT_CONFIG_VALUE_{index}": f"Authorization: Basic {credentials}",
        }
        return environment


# -- URLs ------------------------------------------------------------------------------------------


def default_graphql_url(api_url: str) -> str:
    """GitHub's GraphQL endpoint for a REST base URL.

    ``https://api.github.com`` -> ``https://api.github.com/graphql``;
    ``https://HOST/api/v3`` (Enterprise) -> ``https://HOST/api/graphql``.
    """
    parts = urlsplit(api_url.rstrip("/"))
    path = parts.path.rstrip("/").removesuffix("/v3")
    return urlunsplit(parts._replace(path=f"{path}/graphql"))


def default_clone_url(api_url: str, repo: str) -> str:
    """The HTTPS clone URL of ``repo`` on the server behind ``api_url``.

    ``https://api.github.com`` -> ``https://github.com/owner/name.git``;
    ``https://HOST/api/v3`` -> ``https://HOST/owner/name.git``.
    """
    parts = urlsplit(api_url.rstrip("/"))
    host = "github.com" if parts.hostname == "api.github.com" else parts.netloc
    path = parts.path.rstrip("/").removesuffix("/api/v3")
    return urlunsplit((parts.scheme, host, f"{path}/{repo}.git", "", ""))


def _origin(url: str) -> tuple[str, str | None, int | None]:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname, parts.port


def _token_may_go_to(clone_url: str, api_url: str, repo: str) -> bool:
    """Whether git may send the API token to ``clone_url``.

    Only to the server the API belongs to (its derived clone host), and over plain HTTP only
    when the API itself is plain HTTP there: a mirror elsewhere must not see the token.
    """
    clone, own = urlsplit(clone_url), urlsplit(default_clone_url(api_url, repo))
    if clone.scheme not in ("http", "https") or clone.hostname != own.hostname:
        return False
    return clone.scheme == "https" or own.scheme == "http"


def _without_credentials(url: str) -> str:
    parts = urlsplit(url)
    if not parts.username and not parts.password:
        return url
    netloc = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def _git_reason(error: git.GitCommandError) -> str:
    """The last ``fatal:``/``error:`` line git printed (GitPython wraps stderr in quotes)."""
    text = str(error.stderr or "").strip().removeprefix("stderr:").strip().strip("'")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    wanted = [line for line in lines if line.startswith(("fatal:", "error:"))] or lines
    if not wanted:
        return f"git exited with {error.status}"
    return wanted[-1].removeprefix("fatal:").removeprefix("error:").strip()


# -- records ---------------------------------------------------------------------------------------


def _issue_from_graphql(node: dict[str, Any]) -> Issue:
    comments = tuple(
        Comment(
            author=(c.get("author") or {}).get("login") or GHOST,
            body=c.get("body") or "",
            created_at=c.get("createdAt") or "",
        )
        for c in (node.get("comments") or {}).get("nodes") or []
        if c
    )
    return Issue(
        number=int(node["number"]),
        title=node.get("title") or "",
        body=node.get("body") or "",
        created_at=node.get("createdAt") or "",
        comments=comments,
    )


def _issue_from_rest(raw: dict[str, Any], comments: list[Comment]) -> Issue:
    return Issue(
        number=int(raw["number"]),
        title=raw.get("title") or "",
        body=raw.get("body") or "",
        created_at=raw.get("created_at") or "",
        is_pull_request="pull_request" in raw,
        comments=tuple(comments),
    )


def _comment_from_rest(raw: dict[str, Any]) -> Comment:
    return Comment(
        author=(raw.get("user") or {}).get("login") or GHOST,
        body=raw.get("body") or "",
        created_at=raw.get("created_at") or "",
    )


class _RawObject(NonCompletableGithubObject):
    """A REST list item kept as GitHub's JSON.

    PyGithub's typed objects fetch an item again to "complete" any field the list left out (a
    plain issue has no ``pull_request`` key, for one): one hidden call per item.
    """

    def _initAttributes(self) -> None:
        pass

    def _useAttributes(self, attributes: dict[str, Any]) -> None:
        pass


class _GraphQLUnavailable(Exception):
    """The GraphQL endpoint refused the first query: use the REST fallback."""


def _github_message(error: github.GithubException) -> str:
    data = error.data if isinstance(error.data, dict) else {}
    return str(data.get("message") or error.message or "no message")


# -- transport: counting, rate limits, conditional requests ----------------------------------------


class _ApiMeter:
    """Counts HTTP requests to the API; 304s are free on GitHub's quota."""

    def __init__(self) -> None:
        self.calls = 0
        self.charged = 0

    def record(self, status: int) -> None:
        self.calls += 1
        if status != 304:
            self.charged += 1


class _RateLimitWaiter:
    """Sleeps out a rate limit after telling ``on_wait``, up to ``max_wait_s`` per request."""

    def __init__(self, on_wait: Callable[[str], None] | None, max_wait_s: float) -> None:
        self._on_wait = on_wait
        self._max_wait_s = max_wait_s

    def wait(self, delay_s: float, waited_s: float) -> float:
        """Wait ``delay_s`` more for a request that already waited ``waited_s``; the new total."""
        if waited_s + delay_s > self._max_wait_s:
            raise SourceError(
                f"GitHub rate limit reached; the reset is {math.ceil(delay_s)} s away, "
                f"more than the {self._max_wait_s:g} s allowed to wait",
                hint="retry later, allow a longer wait, or use a token with a higher quota: "
                "--token or GITHUB_TOKEN",
            )
        if self._on_wait is not None:
            self._on_wait(f"GitHub rate limit reached; waiting {math.ceil(delay_s)} s until reset")
        time.sleep(delay_s)
        return waited_s + delay_s


def _reset_delay(headers: Mapping[str, Any]) -> float | None:
    """Seconds until ``X-RateLimit-Reset`` (plus a margin), or ``None`` without the header."""
    lowered = {key.lower(): value for key, value in headers.items()}
    reset = lowered.get("x-ratelimit-reset")
    if reset is None:
        return None
    return max(float(reset) - time.time(), 0.0) + RESET_MARGIN_S


def rate_limit_delay(status: int, headers: Mapping[str, Any], body: str) -> float | None:
    """How long to wait before retrying a response, or ``None`` if it is not a rate limit.

    GitHub signals a primary limit with 403/429 and ``X-RateLimit-Remaining: 0`` (wait for
    ``X-RateLimit-Reset``), a secondary one with ``Retry-After`` or, failing that, its message.
    """
    if status not in (403, 429):
        return None
    lowered = {key.lower(): value for key, value in headers.items()}
    retry_after = lowered.get("retry-after")
    if retry_after is not None:
        try:
            return max(float(retry_after), 0.0)
        except ValueError:
            pass
    if str(lowered.get("x-ratelimit-remaining")) == "0":
        return _reset_delay(lowered) or SECONDARY_LIMIT_WAIT_S
    if status == 429 or "secondary rate limit" in body.lower():
        return SECONDARY_LIMIT_WAIT_S
    return None


class _QuotaAdapter(HTTPAdapter):
    """Counts every request that reaches the network and waits out rate limits, then retries."""

    def __init__(self, meter: _ApiMeter, waiter: _RateLimitWaiter) -> None:
        super().__init__()
        self._meter = meter
        self._waiter = waiter

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        waited = 0.0
        while True:
            response = super().send(request, *args, **kwargs)
            self._meter.record(response.status_code)
            delay = rate_limit_delay(response.status_code, response.headers, response.text)
            if delay is None:
                return response
            response.close()
            waited = self._waiter.wait(delay, waited)


def _keep_headers(request: requests.PreparedRequest) -> requests.PreparedRequest:
    # A session without auth would let requests replace PyGithub's Authorization header with
    # ~/.netrc credentials; PyGithub guards against this the same way.
    return request


def _api_session(cache_path: Path, meter: _ApiMeter, waiter: _RateLimitWaiter) -> requests.Session:
    """A requests session that stores GET responses with their ETags and revalidates each use."""
    session = requests_cache.CachedSession(
        str(cache_path),
        backend="sqlite",
        # Never answer from the cache unasked: every GET goes out with If-None-Match, and only a
        # 304 (free on GitHub's quota) lets the stored body be used.
        expire_after=requests_cache.EXPIRE_IMMEDIATELY,
        allowable_methods=("GET",),
        allowable_codes=(200,),
        cache_control=False,
    )
    adapter = _QuotaAdapter(meter, waiter)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    session.auth = _keep_headers
    return session


def _use_session(client: github.Github, session: requests.Session) -> None:
    """Make ``client`` send its requests through ``session``.

    PyGithub's only public hook for its transport, ``Requester.injectConnectionClasses``, is
    process-wide; setting the connection class on this client's requester leaves every other
    PyGithub client in the process as it was.
    """
    requester = client.requester
    attribute = "_Requester__connectionClass"
    base = getattr(requester, attribute, None)
    if base is None:
        raise RuntimeError("this PyGithub version has no per-client connection class; pin pygithub<3")

    def init(connection: Any, *args: Any, **kwargs: Any) -> None:
        base.__init__(connection, *args, **kwargs)
        connection.session.close()
        connection.session = session

    setattr(requester, attribute, type("CachedSessionConnection", (base,), {"__init__": init}))
