"""A real local HTTP server speaking the part of GitHub's REST and GraphQL APIs that repo2env uses.

GitHub is not reachable from the machines this project runs on, so :class:`FakeGitHub` stands in
for it: a ``ThreadingHTTPServer`` on 127.0.0.1 that answers with GitHub's JSON shapes, headers
(``ETag``, ``X-RateLimit-*``, ``Link``), status codes and error bodies, so PyGithub and
:class:`repo2env.mine.github.GitHubSource` run their real network code against it.

It serves the content of an ``issues.json`` file::

    {"repository": "owner/name",
     "issues":   [REST issue objects, PRs included (they carry a "pull_request" key)],
     "pulls":    [REST pull objects],
     "comments": [REST issue comment objects],
     # optional:
     "closing":  {"PR number": [issue numbers]},   # else parsed from the PR's title and body
     "pull_commits": {"PR number": [REST commit objects]},   # else read from git_path, else []
     "default_branch": "main",
     "empty": false}                                # true: a repository without commits

GraphQL is not implemented in general: the server recognises the one operation GitHubSource
sends (``MergedPullRequests``) by name and answers it from its variables.

The ``rest_*`` builders and :func:`synthetic_repository` make such data in code, e.g. a
5,000-PR repository for a benchmark.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import parse_qs, urlencode, urlsplit

import git

GITHUB_API = "https://api.github.com"
GRAPHQL_OPERATION = "MergedPullRequests"
DOCS = "https://docs.github.com/rest"
# GitHub's closing keywords (https://docs.github.com/issues/tracking-your-work-with-issues/
# linking-a-pull-request-to-an-issue) before "#N", "owner/name#N" or the issue's URL.
CLOSING_REFERENCE = re.compile(
    r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?):?\s+"
    r"(?:https?://github\.com/(?P<url_repo>[\w.-]+/[\w.-]+)/issues/|(?P<repo>[\w.-]+/[\w.-]+)?#)"
    r"(?P<number>\d+)\b",
    re.IGNORECASE,
)
MAX_PAGE_SIZE = 100


class RecordedRequest(NamedTuple):
    """One request the server answered: method, path without the query string, status."""

    method: str
    path: str
    status: int


class _Reply(NamedTuple):
    status: int
    payload: Any
    headers: dict[str, str]
    charged: bool = True  #: counts against the quota (refusals before any work do not)


class _RateBucket:
    """GitHub's fixed-window quota for one resource (``core`` or ``graphql``)."""

    def __init__(self, limit: int | None, reset_after_s: float) -> None:
        self.enforced = limit is not None
        self.limit = limit if limit is not None else 5000
        self.reset_after_s = reset_after_s if limit is not None else 3600.0
        self.used = 0
        self.reset_at = time.time() + self.reset_after_s

    def _roll(self, now: float) -> None:
        if now >= self.reset_at:
            self.used = 0
            self.reset_at = now + self.reset_after_s

    def exhausted(self, now: float) -> bool:
        self._roll(now)
        return self.enforced and self.used >= self.limit

    def charge(self) -> None:
        self.used += 1

    def snapshot(self, now: float) -> dict[str, int]:
        self._roll(now)
        return {
            "limit": self.limit,
            "used": self.used,
            "remaining": max(self.limit - self.used, 0),
            "reset": math.ceil(self.reset_at),
        }


class FakeGitHub:
    """A local GitHub API serving one repository's ``issues.json`` data.

    ``tokens``: the accepted tokens (``None``: any token is accepted; another token gets 401).
    ``private``: without a valid token every repository endpoint answers 404, as GitHub does.
    ``graphql=False``: ``POST /graphql`` answers 404, like a GitHub Enterprise without it.
    ``rate_limit``: requests per window and resource before 403 (REST) or a ``RATE_LIMITED``
    GraphQL error, until the window resets ``rate_reset_after_s`` later; 304s are free.
    ``git_path``: a git repository with ``refs/pull/N/head``: PR commits are read from it, and it is
    served for cloning over git's dumb HTTP protocol at ``{url}/owner/name.git`` (a token is
    required there when ``private`` or ``tokens`` is set).
    ``enterprise``: serve REST under ``/api/v3`` and GraphQL at ``/api/graphql``.
    ``graphql_timeout_above``: a query asking for more PRs than this answers 502, as GitHub does
    when a heavy query times out. ``graphql_missing_fields``: fields an older GitHub Enterprise
    schema lacks; a query using one gets GitHub's ``undefinedField`` error.
    """

    def __init__(
        self,
        data: dict[str, Any],
        *,
        tokens: set[str] | None = None,
        private: bool = False,
        graphql: bool = True,
        rate_limit: int | None = None,
        rate_reset_after_s: float = 1.0,
        git_path: Path | None = None,
        enterprise: bool = False,
        graphql_timeout_above: int | None = None,
        graphql_missing_fields: tuple[str, ...] = (),
    ) -> None:
        self.repository: str = data["repository"]
        self.owner, self.name = self.repository.split("/")
        self.tokens = tokens
        self.private = private
        self.graphql = graphql
        self.enterprise = enterprise
        self.graphql_timeout_above = graphql_timeout_above
        self.graphql_missing_fields = graphql_missing_fields
        self.default_branch: str = data.get("default_branch") or "main"
        self.empty: bool = bool(data.get("empty", False))
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._buckets = {
            "core": _RateBucket(rate_limit, rate_reset_after_s),
            "graphql": _RateBucket(rate_limit, rate_reset_after_s),
        }
        self._issues = {int(issue["number"]): issue for issue in data.get("issues", [])}
        self._pulls = {int(pull["number"]): pull for pull in data.get("pulls", [])}
        self._comments: list[dict[str, Any]] = list(data.get("comments", []))
        self._comments_by_issue: dict[int, list[dict[str, Any]]] = {}
        for comment in sorted(self._comments, key=lambda c: (c.get("created_at") or "", c.get("id") or 0)):
            number = int(str(comment["issue_url"]).rstrip("/").rsplit("/", 1)[1])
            self._comments_by_issue.setdefault(number, []).append(comment)
        # The count an issue shows must match what its comments endpoint serves.
        self._issues = {
            number: issue | {"comments": len(self._comments_by_issue.get(number, []))}
            for number, issue in self._issues.items()
        }
        self._closing = {int(pr): [int(n) for n in issues] for pr, issues in data.get("closing", {}).items()}
        self._pull_commits = {int(pr): list(commits) for pr, commits in data.get("pull_commits", {}).items()}
        self._git_path = git_path
        self._git_lock = threading.Lock()
        self._git_dir: Path | None = None
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> FakeGitHub:
        """Listen on a free port of 127.0.0.1 in a daemon thread; ``url`` is set from then on."""
        fake = self
        if self._git_path is not None:
            # Dumb HTTP needs the ref list and pack index files that update-server-info writes.
            repo = git.Repo(self._git_path)
            repo.git.update_server_info()
            self._git_dir = Path(repo.git_dir).resolve()

        class Handler(_Handler):
            server_fake = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-github", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening; later connections are refused."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def api_url(self) -> str:
        """The REST base URL to give PyGithub (``/api/v3`` on an enterprise server)."""
        return f"{self.url}/api/v3" if self.enterprise else self.url

    @property
    def graphql_url(self) -> str:
        return f"{self.url}/api/graphql" if self.enterprise else f"{self.url}/graphql"

    def count(self, *, method: str | None = None, path: str | None = None, status: int | None = None) -> int:
        """How many recorded requests match every given field (``path`` may end in ``*``)."""

        def matches(request: RecordedRequest) -> bool:
            if method is not None and request.method != method:
                return False
            if status is not None and request.status != status:
                return False
            if path is not None:
                if path.endswith("*"):
                    return request.path.startswith(path[:-1])
                return request.path == path
            return True

        with self._lock:
            return sum(1 for request in self.requests if matches(request))

    def reset_requests(self) -> None:
        """Forget the recorded requests (the rate-limit windows keep running)."""
        with self._lock:
            self.requests.clear()

    # -- request handling (called from the handler threads) ----------------------------------

    def _record(self, method: str, path: str, status: int) -> None:
        with self._lock:
            self.requests.append(RecordedRequest(method, path, status))

    def _rate_headers(self, resource: str, now: float) -> dict[str, str]:
        snapshot = self._buckets[resource].snapshot(now)
        return {
            "X-RateLimit-Limit": str(snapshot["limit"]),
            "X-RateLimit-Remaining": str(snapshot["remaining"]),
            "X-RateLimit-Reset": str(snapshot["reset"]),
            "X-RateLimit-Used": str(snapshot["used"]),
            "X-RateLimit-Resource": resource,
        }

    def _token_status(self, authorization: str | None) -> str:
        """``"none"``, ``"valid"`` or ``"invalid"`` for the request's Authorization header.

        ``token X`` and ``bearer X`` as the API takes them; ``Basic base64(user:X)`` as git sends it.
        """
        if not authorization:
            return "none"
        scheme, _, credentials = authorization.strip().partition(" ")
        token = credentials.strip()
        if scheme.lower() == "basic":
            try:
                token = base64.b64decode(token).decode().partition(":")[2]
            except (ValueError, UnicodeDecodeError):
                return "invalid"
        elif scheme.lower() not in ("token", "bearer"):
            return "invalid"
        if not token or (self.tokens is not None and token not in self.tokens):
            return "invalid"
        return "valid"

    def handle(
        self, method: str, raw_path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        """Answer one request: status, headers, body bytes."""
        split = urlsplit(raw_path)
        path = split.path.rstrip("/") or "/"
        query = {key: values[-1] for key, values in parse_qs(split.query).items()}
        now = time.time()
        graphql_path = "/api/graphql" if self.enterprise else "/graphql"
        is_graphql = path == graphql_path
        rest_path = path
        if not is_graphql and self.enterprise:
            rest_path = path[len("/api/v3") :] if path.startswith("/api/v3/") or path == "/api/v3" else ""
        resource = "graphql" if is_graphql else "core"
        token = self._token_status(headers.get("authorization"))
        git_prefix = f"/{self.repository}.git/"
        if self._git_dir is not None and split.path.lower().startswith(git_prefix.lower()):
            status, response_headers, content = self._serve_git_file(split.path[len(git_prefix) :], token)
            self._record(method, path, status)
            return status, response_headers, content

        status, payload, extra_headers, charged = self._dispatch(
            method, rest_path, is_graphql, query, body, token, now, resource
        )
        response_headers = {
            "Content-Type": "application/json; charset=utf-8",
            "Cache-Control": "private, max-age=60, s-maxage=60",
            "Vary": "Accept, Authorization, Cookie, X-GitHub-OTP, Accept-Encoding",
            "X-GitHub-Media-Type": "github.v3; format=json",
            "X-GitHub-Request-Id": hashlib.sha1(f"{now}{raw_path}".encode()).hexdigest()[:16].upper(),
        }
        response_headers.update(extra_headers)
        text = json.dumps(payload) if payload is not None else ""
        if self.url and GITHUB_API != self.api_url:
            text = text.replace(GITHUB_API, self.api_url)
        encoded = text.encode()

        with self._lock:
            bucket = self._buckets[resource]
            if method == "GET" and status == 200:
                etag = 'W/"' + hashlib.sha256(encoded).hexdigest()[:40] + '"'
                response_headers["ETag"] = etag
                if _etag_matches(headers.get("if-none-match"), etag):
                    status, encoded = 304, b""
            if charged and status != 304 and path != "/rate_limit":
                bucket.charge()
            response_headers.update(self._rate_headers(resource, now))
        self._record(method, path, status)
        return status, response_headers, encoded

    def _serve_git_file(self, relative: str, token: str) -> tuple[int, dict[str, str], bytes]:
        """A file of ``git_path`` over git's "dumb" HTTP protocol, with GitHub's auth rules."""
        needs_token = self.private or self.tokens is not None
        if token == "invalid" or (needs_token and token != "valid"):
            return 401, {"WWW-Authenticate": 'Basic realm="GitHub"', "Content-Type": "text/plain"}, b""
        assert self._git_dir is not None
        file = (self._git_dir / relative).resolve()
        if not file.is_relative_to(self._git_dir) or not file.is_file():
            return 404, {"Content-Type": "text/plain"}, b"Not Found"
        return 200, {"Content-Type": "application/octet-stream"}, file.read_bytes()

    def _dispatch(
        self,
        method: str,
        rest_path: str,
        is_graphql: bool,
        query: dict[str, str],
        body: bytes,
        token: str,
        now: float,
        resource: str,
    ) -> _Reply:
        if token == "invalid":
            return _Reply(401, _error("Bad credentials", status=401), {})
        if is_graphql:
            if not self.graphql:
                return _Reply(404, _error("Not Found", status=404), {}, False)
            if method != "POST":
                return _Reply(404, _error("Not Found", status=404), {}, False)
            if token == "none":
                message = "This endpoint requires you to be authenticated."
                return _Reply(401, _error(message, status=401), {}, False)
        with self._lock:
            exhausted = self._buckets[resource].exhausted(now)
        if exhausted:
            if is_graphql:
                message = "API rate limit exceeded for user ID 1."
                return _Reply(200, {"errors": [{"type": "RATE_LIMITED", "message": message}]}, {}, False)
            message = "API rate limit exceeded for 127.0.0.1. (But here's the good news: Authenticated requests get a higher rate limit. Check out the documentation for more details.)"
            return _Reply(403, _error(message, status=403), {}, False)
        if is_graphql:
            return self._graphql(body, token)
        if method != "GET":
            return _Reply(404, _error("Not Found", status=404), {})
        return self._rest(rest_path, query, token, now)

    # -- REST --------------------------------------------------------------------------------

    def _rest(self, path: str, query: dict[str, str], token: str, now: float) -> _Reply:
        if path == "/rate_limit":
            resources = {name: bucket.snapshot(now) for name, bucket in self._buckets.items()}
            return _Reply(200, {"resources": resources, "rate": resources["core"]}, {})
        if path == "/user":
            if token != "valid":
                return _Reply(401, _error("Requires authentication", status=401), {})
            return _Reply(200, rest_user("fake-user"), {})
        match = re.fullmatch(r"/repos/([^/]+)/([^/]+)(/.*)?", path)
        if not match or f"{match[1]}/{match[2]}".lower() != self.repository.lower():
            return _not_found()
        if self.private and token != "valid":
            return _not_found()
        rest = match[3] or ""
        if rest == "":
            return _Reply(200, self._repository_object(), {})
        if rest == "/pulls":
            return self._page(self._list_pulls(query), query, path)
        if rest == "/issues":
            return self._page(self._list_issues(query), query, path)
        if rest == "/issues/comments":
            return self._page(self._list_comments(query), query, path)
        if found := re.fullmatch(r"/pulls/(\d+)", rest):
            pull = self._pulls.get(int(found[1]))
            return _Reply(200, self._full_pull(pull), {}) if pull else _not_found()
        if found := re.fullmatch(r"/pulls/(\d+)/commits", rest):
            pull = self._pulls.get(int(found[1]))
            return self._page(self._commits_of(pull), query, path) if pull else _not_found()
        if found := re.fullmatch(r"/issues/(\d+)", rest):
            issue = self._issues.get(int(found[1]))
            return _Reply(200, issue, {}) if issue else _not_found()
        if found := re.fullmatch(r"/issues/(\d+)/comments", rest):
            number = int(found[1])
            if number not in self._issues:
                return _not_found()
            return self._page(self._comments_by_issue.get(number, []), query, path)
        return _not_found()

    def _repository_object(self) -> dict[str, Any]:
        return {
            "id": 1,
            "node_id": "R_kgDOAAAAAQ",
            "name": self.name,
            "full_name": self.repository,
            "private": self.private,
            "visibility": "private" if self.private else "public",
            "owner": rest_user(self.owner, kind="Organization"),
            "html_url": f"https://github.com/{self.repository}",
            "description": None,
            "fork": False,
            "url": f"{GITHUB_API}/repos/{self.repository}",
            "clone_url": f"https://github.com/{self.repository}.git",
            "created_at": "2020-01-01T00:00:00Z",
            "updated_at": "2024-01-01T00:00:00Z",
            "pushed_at": "2024-01-01T00:00:00Z",
            "size": 0 if self.empty else 1024,
            "default_branch": self.default_branch,
            "archived": False,
            "disabled": False,
            "has_issues": True,
            "open_issues_count": sum(1 for i in self._issues.values() if i.get("state") == "open"),
        }

    def _full_pull(self, pull: dict[str, Any]) -> dict[str, Any]:
        full = dict(pull)
        full.setdefault("merged", pull.get("merged_at") is not None)
        full.setdefault("mergeable", None)
        full.setdefault("comments", len(self._comments_by_issue.get(int(pull["number"]), [])))
        full.setdefault("commits", len(self._commits_of(pull)))
        full.setdefault("additions", 0)
        full.setdefault("deletions", 0)
        full.setdefault("changed_files", 0)
        return full

    def _list_pulls(self, query: dict[str, str]) -> list[dict[str, Any]]:
        state = query.get("state", "open")
        pulls = [p for p in self._pulls.values() if state == "all" or p.get("state") == state]
        sort = query.get("sort", "created")
        field = {"created": "created_at", "updated": "updated_at"}.get(sort, "created_at")
        default_direction = "desc" if sort == "created" else "asc"
        descending = query.get("direction", default_direction) == "desc"
        return sorted(pulls, key=lambda p: (p.get(field) or "", p["number"]), reverse=descending)

    def _list_issues(self, query: dict[str, str]) -> list[dict[str, Any]]:
        state = query.get("state", "open")
        issues = [i for i in self._issues.values() if state == "all" or i.get("state") == state]
        if since := query.get("since"):
            issues = [i for i in issues if (i.get("updated_at") or "") >= since]
        field = {"created": "created_at", "updated": "updated_at"}.get(
            query.get("sort", "created"), "created_at"
        )
        descending = query.get("direction", "desc") == "desc"
        return sorted(issues, key=lambda i: (i.get(field) or "", i["number"]), reverse=descending)

    def _list_comments(self, query: dict[str, str]) -> list[dict[str, Any]]:
        comments = self._comments
        if since := query.get("since"):
            comments = [c for c in comments if (c.get("updated_at") or "") >= since]
        field = "updated_at" if query.get("sort") == "updated" else "created_at"
        descending = query.get("direction", "asc") == "desc"
        return sorted(comments, key=lambda c: (c.get(field) or "", c.get("id") or 0), reverse=descending)

    def _page(self, items: list[Any], query: dict[str, str], path: str) -> _Reply:
        """One page of ``items`` with GitHub's ``Link`` header (``per_page`` at most 100)."""
        try:
            per_page = max(1, min(int(query.get("per_page", 30)), MAX_PAGE_SIZE))
            page = max(1, int(query.get("page", 1)))
        except ValueError:
            return _Reply(422, _error("Validation Failed", status=422), {})
        last = max(1, math.ceil(len(items) / per_page))
        chunk = items[(page - 1) * per_page : page * per_page]

        def link(to_page: int) -> str:
            params = dict(query, per_page=str(per_page), page=str(to_page))
            prefix = "/api/v3" if self.enterprise else ""
            return f"<{self.url}{prefix}{path}?{urlencode(params)}>"

        relations = []
        if page > 1:
            relations += [f'{link(page - 1)}; rel="prev"', f'{link(1)}; rel="first"']
        if page < last:
            relations += [f'{link(page + 1)}; rel="next"', f'{link(last)}; rel="last"']
        return _Reply(200, chunk, {"Link": ", ".join(relations)} if relations else {})

    def _commits_of(self, pull: dict[str, Any]) -> list[dict[str, Any]]:
        number = int(pull["number"])
        if number in self._pull_commits:
            return self._pull_commits[number]
        if self._git_path is None:
            return []
        with self._git_lock:
            if number not in self._pull_commits:
                self._pull_commits[number] = self._read_git_commits(pull)
            return self._pull_commits[number]

    def _read_git_commits(self, pull: dict[str, Any]) -> list[dict[str, Any]]:
        repo = git.Repo(self._git_path)
        number = int(pull["number"])
        head = f"refs/pull/{number}/head"
        try:
            repo.commit(head)
        except (git.BadName, ValueError):
            head = (pull.get("head") or {}).get("sha") or ""
        base = (pull.get("base") or {}).get("sha")
        try:
            commits = list(repo.iter_commits(f"{base}..{head}" if base else head, max_count=250))
        except git.GitCommandError:
            return []
        return [rest_commit(self.repository, commit) for commit in reversed(commits)]

    # -- GraphQL -----------------------------------------------------------------------------

    def _graphql(self, body: bytes, token: str) -> _Reply:
        try:
            request = json.loads(body or b"{}")
        except json.JSONDecodeError:
            return _Reply(400, _error("Problems parsing JSON", status=400), {})
        query_text = str(request.get("query", ""))
        operation = request.get("operationName")
        if not operation:
            found = re.search(r"\b(?:query|mutation)\s+(\w+)", query_text)
            operation = found[1] if found else None
        if operation != GRAPHQL_OPERATION:
            message = f"this fake GitHub answers only the {GRAPHQL_OPERATION} query, not {operation!r}"
            return _Reply(200, {"errors": [{"message": message}]}, {})
        for field in self.graphql_missing_fields:
            if re.search(rf"\b{re.escape(field)}\b", query_text):
                error = {
                    "path": [f"query {operation}", field],
                    "extensions": {"code": "undefinedField", "typeName": "PullRequest", "fieldName": field},
                    "locations": [{"line": 1, "column": 1}],
                    "message": f"Field '{field}' doesn't exist on type 'PullRequest'",
                }
                return _Reply(200, {"errors": [error]}, {})
        variables = request.get("variables") or {}
        owner, name = str(variables.get("owner", "")), str(variables.get("name", ""))
        if f"{owner}/{name}".lower() != self.repository.lower() or (self.private and token != "valid"):
            error = {
                "type": "NOT_FOUND",
                "path": ["repository"],
                "locations": [{"line": 2, "column": 3}],
                "message": f"Could not resolve to a Repository with the name '{owner}/{name}'.",
            }
            return _Reply(200, {"data": {"repository": None}, "errors": [error]}, {})
        first = int(variables.get("first") or 0)
        if self.graphql_timeout_above is not None and first > self.graphql_timeout_above:
            message = "We couldn't respond to your request in time. Sorry about that. Please try resubmitting your request and contact us if the problem persists."
            return _Reply(502, {"data": None, "errors": [{"message": message}]}, {})
        if not 1 <= first <= MAX_PAGE_SIZE:
            message = f"Requesting {first} records on the `pullRequests` connection exceeds the `first` limit of 100 records."
            return _Reply(200, {"errors": [{"type": "EXCESSIVE_PAGINATION", "message": message}]}, {})
        merged = sorted(
            (p for p in self._pulls.values() if p.get("merged_at")),
            key=lambda p: (p.get("created_at") or "", p["number"]),
            reverse=True,
        )
        after = variables.get("after")
        start = _cursor_offset(after) + 1 if after else 0
        chunk = merged[start : start + first]
        end = start + len(chunk) - 1
        page_info = {
            "hasNextPage": start + len(chunk) < len(merged),
            "endCursor": _cursor(end) if chunk else None,
        }
        repository = {
            "defaultBranchRef": None if self.empty else {"name": self.default_branch},
            "pullRequests": {"pageInfo": page_info, "nodes": [self._graphql_pull(p) for p in chunk]},
        }
        return _Reply(200, {"data": {"repository": repository}}, {})

    def _graphql_pull(self, pull: dict[str, Any]) -> dict[str, Any]:
        commits = [
            {
                "commit": {
                    "message": c["commit"]["message"],
                    "committedDate": c["commit"]["committer"]["date"],
                    "authoredDate": c["commit"]["author"]["date"],
                }
            }
            for c in self._commits_of(pull)[:100]
        ]
        issues = [self._graphql_issue(self._issues[n]) for n in self._closing_issues(pull)[:20]]
        merge_sha = pull.get("merge_commit_sha")
        return {
            "number": pull["number"],
            "title": pull.get("title") or "",
            "body": pull.get("body") or "",
            "createdAt": pull.get("created_at"),
            "mergedAt": pull.get("merged_at"),
            "mergeCommit": {"oid": merge_sha} if merge_sha else None,
            "headRefOid": (pull.get("head") or {}).get("sha"),
            "baseRefName": (pull.get("base") or {}).get("ref") or self.default_branch,
            "commits": {"nodes": commits},
            "closingIssuesReferences": {"nodes": issues},
        }

    def _closing_issues(self, pull: dict[str, Any]) -> list[int]:
        number = int(pull["number"])
        if number in self._closing:
            candidates = self._closing[number]
        else:
            text = f"{pull.get('title') or ''}\n{pull.get('body') or ''}"
            candidates = []
            for found in CLOSING_REFERENCE.finditer(text):
                named = found["url_repo"] or found["repo"]
                if not named or named.lower() == self.repository.lower():
                    candidates.append(int(found["number"]))
        issues = [n for n in candidates if n in self._issues and "pull_request" not in self._issues[n]]
        return list(dict.fromkeys(issues))

    def _graphql_issue(self, issue: dict[str, Any]) -> dict[str, Any]:
        comments = [
            {
                "body": c.get("body") or "",
                "createdAt": c.get("created_at"),
                "author": {"login": c["user"]["login"]} if c.get("user") else None,
            }
            for c in self._comments_by_issue.get(int(issue["number"]), [])[:50]
        ]
        return {
            "number": issue["number"],
            "title": issue.get("title") or "",
            "body": issue.get("body") or "",
            "createdAt": issue.get("created_at"),
            "repository": {"nameWithOwner": self.repository},
            "comments": {"nodes": comments},
        }


class _Handler(BaseHTTPRequestHandler):
    """Turns HTTP/1.1 requests into :meth:`FakeGitHub.handle` calls."""

    server_fake: FakeGitHub
    protocol_version = "HTTP/1.1"

    def version_string(self) -> str:
        return "GitHub.com"

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {key.lower(): value for key, value in self.headers.items()}
        try:
            status, response_headers, payload = self.server_fake.handle(
                self.command, self.path, headers, body
            )
        except Exception as error:  # a bug in the fake: answer 500 so the test shows it
            status, response_headers = 500, {"Content-Type": "application/json"}
            payload = json.dumps({"message": f"fake GitHub failed: {error!r}"}).encode()
            self.server_fake._record(self.command, urlsplit(self.path).path, 500)
        self.send_response(status)
        for key, value in response_headers.items():
            self.send_header(key, value)
        if status != 304:
            self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if status != 304:
            self.wfile.write(payload)

    do_GET = _serve
    do_POST = _serve

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test output is not the place for an access log."""


def _error(message: str, *, status: int) -> dict[str, str]:
    return {"message": message, "documentation_url": DOCS, "status": str(status)}


def _not_found() -> _Reply:
    return _Reply(404, _error("Not Found", status=404), {})


def _etag_matches(if_none_match: str | None, etag: str) -> bool:
    if not if_none_match:
        return False

    def bare(tag: str) -> str:
        return tag.strip().removeprefix("W/")

    return any(bare(candidate) == bare(etag) for candidate in if_none_match.split(","))


def _cursor(offset: int) -> str:
    return base64.b64encode(f"cursor:v2:{offset}".encode()).decode()


def _cursor_offset(cursor: str) -> int:
    return int(base64.b64decode(cursor).decode().rsplit(":", 1)[1])


# -- builders of GitHub's REST objects -------------------------------------------------------


def rest_user(login: str, *, kind: str = "User") -> dict[str, Any]:
    """A REST "simple user" object."""
    user_id = int(hashlib.sha1(login.encode()).hexdigest()[:7], 16)
    return {
        "login": login,
        "id": user_id,
        "node_id": f"U_{user_id}",
        "avatar_url": f"https://avatars.githubusercontent.com/u/{user_id}?v=4",
        "url": f"{GITHUB_API}/users/{login}",
        "html_url": f"https://github.com/{login}",
        "type": kind,
        "site_admin": False,
    }


def rest_issue(
    repo: str,
    number: int,
    *,
    title: str,
    body: str | None,
    created_at: str,
    author: str = "reporter",
    closed_at: str | None = None,
    comments: int = 0,
    pull_merged_at: str | None = None,
    is_pull_request: bool = False,
) -> dict[str, Any]:
    """A REST issue object as ``GET /repos/{o}/{r}/issues`` lists it (PRs carry ``pull_request``)."""
    kind = "pull" if is_pull_request else "issues"
    issue: dict[str, Any] = {
        "url": f"{GITHUB_API}/repos/{repo}/issues/{number}",
        "repository_url": f"{GITHUB_API}/repos/{repo}",
        "comments_url": f"{GITHUB_API}/repos/{repo}/issues/{number}/comments",
        "html_url": f"https://github.com/{repo}/{kind}/{number}",
        "id": 1_000_000 + number,
        "node_id": f"I_{number}",
        "number": number,
        "title": title,
        "user": rest_user(author),
        "labels": [],
        "state": "closed" if closed_at else "open",
        "locked": False,
        "assignee": None,
        "assignees": [],
        "milestone": None,
        "comments": comments,
        "created_at": created_at,
        "updated_at": closed_at or created_at,
        "closed_at": closed_at,
        "author_association": "CONTRIBUTOR",
        "body": body,
    }
    if is_pull_request:
        issue["pull_request"] = {
            "url": f"{GITHUB_API}/repos/{repo}/pulls/{number}",
            "html_url": f"https://github.com/{repo}/pull/{number}",
            "diff_url": f"https://github.com/{repo}/pull/{number}.diff",
            "patch_url": f"https://github.com/{repo}/pull/{number}.patch",
            "merged_at": pull_merged_at,
        }
    return issue


def rest_pull(
    repo: str,
    number: int,
    *,
    title: str,
    body: str | None,
    created_at: str,
    head_sha: str,
    base_sha: str,
    merged_at: str | None = None,
    merge_commit_sha: str | None = None,
    closed_at: str | None = None,
    base_ref: str = "main",
    head_ref: str | None = None,
    author: str = "contributor",
) -> dict[str, Any]:
    """A REST pull object as ``GET /repos/{o}/{r}/pulls`` lists it."""
    owner = repo.split("/")[0]
    head_ref = head_ref or f"topic-{number}"
    closed_at = closed_at or merged_at
    repo_stub = {"id": 1, "name": repo.split("/")[1], "full_name": repo, "url": f"{GITHUB_API}/repos/{repo}"}
    return {
        "url": f"{GITHUB_API}/repos/{repo}/pulls/{number}",
        "id": 2_000_000 + number,
        "node_id": f"PR_{number}",
        "html_url": f"https://github.com/{repo}/pull/{number}",
        "diff_url": f"https://github.com/{repo}/pull/{number}.diff",
        "patch_url": f"https://github.com/{repo}/pull/{number}.patch",
        "issue_url": f"{GITHUB_API}/repos/{repo}/issues/{number}",
        "commits_url": f"{GITHUB_API}/repos/{repo}/pulls/{number}/commits",
        "number": number,
        "state": "closed" if closed_at else "open",
        "locked": False,
        "title": title,
        "user": rest_user(author),
        "body": body,
        "created_at": created_at,
        "updated_at": closed_at or created_at,
        "closed_at": closed_at,
        "merged_at": merged_at,
        "merge_commit_sha": merge_commit_sha,
        "draft": False,
        "head": {
            "label": f"{owner}:{head_ref}",
            "ref": head_ref,
            "sha": head_sha,
            "user": rest_user(owner, kind="Organization"),
            "repo": repo_stub,
        },
        "base": {
            "label": f"{owner}:{base_ref}",
            "ref": base_ref,
            "sha": base_sha,
            "user": rest_user(owner, kind="Organization"),
            "repo": repo_stub,
        },
        "author_association": "CONTRIBUTOR",
    }


def rest_comment(
    repo: str, issue_number: int, comment_id: int, *, body: str, author: str, created_at: str
) -> dict[str, Any]:
    """A REST issue comment object."""
    return {
        "url": f"{GITHUB_API}/repos/{repo}/issues/comments/{comment_id}",
        "html_url": f"https://github.com/{repo}/issues/{issue_number}#issuecomment-{comment_id}",
        "issue_url": f"{GITHUB_API}/repos/{repo}/issues/{issue_number}",
        "id": comment_id,
        "node_id": f"IC_{comment_id}",
        "user": rest_user(author),
        "created_at": created_at,
        "updated_at": created_at,
        "author_association": "NONE",
        "body": body,
    }


def rest_commit(repo: str, commit: git.Commit) -> dict[str, Any]:
    """A REST commit object (as ``/pulls/{n}/commits`` lists it) for a GitPython commit."""

    def signature(actor: git.Actor, when: datetime) -> dict[str, str]:
        return {"name": actor.name or "", "email": actor.email or "", "date": _iso(when)}

    return {
        "sha": commit.hexsha,
        "node_id": f"C_{commit.hexsha[:12]}",
        "url": f"{GITHUB_API}/repos/{repo}/commits/{commit.hexsha}",
        "html_url": f"https://github.com/{repo}/commit/{commit.hexsha}",
        "commit": {
            "author": signature(commit.author, commit.authored_datetime),
            "committer": signature(commit.committer, commit.committed_datetime),
            "message": str(commit.message),
            "tree": {
                "sha": commit.tree.hexsha,
                "url": f"{GITHUB_API}/repos/{repo}/git/trees/{commit.tree.hexsha}",
            },
            "comment_count": 0,
        },
        "author": None,
        "committer": None,
        "parents": [
            {"sha": p.hexsha, "url": f"{GITHUB_API}/repos/{repo}/commits/{p.hexsha}"} for p in commit.parents
        ],
    }


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def synthetic_repository(
    repo: str = "acme/widgets",
    *,
    pulls: int = 500,
    unmerged_every: int = 7,
    comments_per_issue: int = 2,
    start: datetime = datetime(2021, 1, 1, tzinfo=UTC),
) -> dict[str, Any]:
    """Generated ``issues.json`` data: ``pulls`` PRs, each fixing its own issue.

    Issue ``2k+1`` is opened an hour after the previous pair, PR ``2k+2`` ("Fixes #2k+1") half an
    hour later, merged twenty minutes after that, except every ``unmerged_every``-th PR, which is
    closed unmerged. Every issue gets ``comments_per_issue`` comments. Commit SHAs are made up, so
    this data suits API-level tests and benchmarks, not cloning.
    """
    issues: list[dict[str, Any]] = []
    pull_objects: list[dict[str, Any]] = []
    comments: list[dict[str, Any]] = []
    base_sha = hashlib.sha1(b"base").hexdigest()
    for k in range(pulls):
        issue_number, pull_number = 2 * k + 1, 2 * k + 2
        opened = start + timedelta(hours=k)
        proposed = opened + timedelta(minutes=30)
        closed = proposed + timedelta(minutes=20)
        merged = (k + 1) % unmerged_every != 0 if unmerged_every else True
        issues.append(
            rest_issue(
                repo,
                issue_number,
                title=f"widget {k} breaks on empty input",
                body=f"Calling widget_{k}([]) raises IndexError.",
                created_at=_iso(opened),
                closed_at=_iso(closed) if merged else None,
                comments=comments_per_issue,
            )
        )
        for c in range(comments_per_issue):
            comments.append(
                rest_comment(
                    repo,
                    issue_number,
                    10 * issue_number + c,
                    body=f"comment {c} on issue {issue_number}",
                    author=f"user{c}",
                    created_at=_iso(opened + timedelta(minutes=5 * (c + 1))),
                )
            )
        head_sha = hashlib.sha1(f"head {pull_number}".encode()).hexdigest()
        merge_sha = hashlib.sha1(f"merge {pull_number}".encode()).hexdigest()
        pull_objects.append(
            rest_pull(
                repo,
                pull_number,
                title=f"Handle empty input in widget {k}",
                body=f"Fixes #{issue_number}.",
                created_at=_iso(proposed),
                head_sha=head_sha,
                base_sha=base_sha,
                merged_at=_iso(closed) if merged else None,
                merge_commit_sha=merge_sha,
                closed_at=_iso(closed),
            )
        )
        issues.append(
            rest_issue(
                repo,
                pull_number,
                title=f"Handle empty input in widget {k}",
                body=f"Fixes #{issue_number}.",
                created_at=_iso(proposed),
                closed_at=_iso(closed),
                is_pull_request=True,
                pull_merged_at=_iso(closed) if merged else None,
                author="contributor",
            )
        )
    return {"repository": repo, "issues": issues, "pulls": pull_objects, "comments": comments}
