"""A real local HTTP server speaking the part of the Hugging Face Hub API that repo2env uses.

The Hub is not reachable from the machines this project runs on, so :class:`FakeHub` stands in for
it: a ``ThreadingHTTPServer`` on 127.0.0.1 that answers the requests ``huggingface_hub`` (2.4)
really sends, with the Hub's JSON shapes, headers (``X-Repo-Commit``, ``ETag``, ``X-Error-Code``,
``X-Error-Message``) and status codes, so :class:`huggingface_hub.HfApi` and ``snapshot_download``
run their real network code against it:

- ``POST /api/repos/create`` (``exist_ok`` relies on the 409), ``POST /api/validate-yaml``
- ``GET /api/datasets/{id}[/revision/{rev}]`` (repo_info), ``GET /api/datasets/{id}/tree/{rev}``
  (list_repo_files / list_repo_tree), ``GET /api/datasets/{id}/refs``
- ``POST /api/datasets/{id}/branch/{name}`` (create_branch)
- ``POST /api/datasets/{id}/preupload/{rev}``: every file is ``regular`` (no LFS or Xet storage is
  faked), with the remote blob id so the client can drop unchanged files
- ``POST /api/datasets/{id}/commit/{rev}[?create_pr=1]``: the NDJSON commit (base64 files, deleted
  files and folders); ``create_pr`` opens pull request N on ``refs/pr/N``
- ``HEAD|GET /datasets/{id}/resolve/{rev}/{path}``: file download

Repositories live in memory: per repository its refs (branch or ``refs/pr/N`` -> commit), commits
(the whole file tree each, plus parent and message) and pull requests. Tokens map to a user and the
namespaces they may write; every request is recorded for the tests to assert on.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

GITATTRIBUTES = b"*.parquet filter=lfs diff=lfs merge=lfs -text\n"
INVALID_CREDENTIALS = "Invalid credentials in Authorization header"


class RecordedRequest(NamedTuple):
    """One request the server answered."""

    method: str
    path: str  #: URL-decoded, without the query string
    query: dict[str, str]
    status: int
    payload: Any  #: the JSON body (a list of NDJSON items for a commit), or None


@dataclass
class Commit:
    oid: str
    parent: str | None
    message: str
    files: dict[str, bytes]


@dataclass
class PullRequest:
    number: int
    title: str
    target_branch: str
    status: str = "open"

    @property
    def ref(self) -> str:
        return f"refs/pr/{self.number}"


@dataclass
class Repo:
    repo_id: str
    repo_type: str
    private: bool
    refs: dict[str, str] = field(default_factory=dict)
    commits: dict[str, Commit] = field(default_factory=dict)
    pulls: list[PullRequest] = field(default_factory=list)

    def files(self, revision: str = "main") -> dict[str, bytes]:
        return self.commits[self.resolve(revision)].files

    def resolve(self, revision: str) -> str:
        if revision in self.refs:
            return self.refs[revision]
        if revision in self.commits:
            return revision
        raise KeyError(revision)

    def history(self, revision: str = "main") -> list[Commit]:
        """Commits reachable from ``revision``, newest first."""
        commits, oid = [], self.resolve(revision)
        while oid is not None:
            commits.append(self.commits[oid])
            oid = self.commits[oid].parent
        return commits


class _HubError(Exception):
    def __init__(self, status: int, message: str, *, code: str | None = None, headers: dict | None = None,
                 body: dict | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.headers = status, message, code, headers or {}
        self.body = body or {}


def git_blob_id(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


class FakeHub:
    """The Hub on 127.0.0.1. ``tokens``: token -> (user name, namespaces it may write)."""

    def __init__(self, tokens: dict[str, tuple[str, set[str]]] | None = None) -> None:
        self.tokens = tokens if tokens is not None else {"hf_fake_write": ("alice", {"alice", "repo2env-org"})}
        self.repos: dict[tuple[str, str], Repo] = {}
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # ---------------------------------------------------------------- lifecycle

    @property
    def url(self) -> str:
        assert self._server is not None, "start() the server first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeHub:
        hub = self

        class Handler(_Handler):
            fake = hub

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="fake-hub", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> FakeHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---------------------------------------------------------------- state helpers for tests

    def repo(self, repo_id: str, repo_type: str = "dataset") -> Repo:
        return self.repos[(repo_type, repo_id)]

    def seed(self, repo_id: str, files: dict[str, bytes], *, repo_type: str = "dataset", private: bool = False) -> Repo:
        """A repository that already holds ``files`` on main (one commit after the initial one)."""
        repo = self._create(repo_id, repo_type, private)
        head = repo.commits[repo.refs["main"]]
        self._commit(repo, "main", head, {**head.files, **files}, "seeded by the test")
        return repo

    def calls(self, method: str, pattern: str) -> list[RecordedRequest]:
        """Recorded requests whose method matches and whose path matches the regex ``pattern``."""
        return [r for r in self.requests if r.method == method and re.search(pattern, r.path)]

    # ---------------------------------------------------------------- model

    def _create(self, repo_id: str, repo_type: str, private: bool) -> Repo:
        repo = Repo(repo_id=repo_id, repo_type=repo_type, private=private)
        # The Hub starts every repository with one commit holding .gitattributes.
        first = Commit(oid=_new_oid(), parent=None, message="initial commit", files={".gitattributes": GITATTRIBUTES})
        repo.commits[first.oid] = first
        repo.refs["main"] = first.oid
        self.repos[(repo_type, repo_id)] = repo
        return repo

    def _commit(self, repo: Repo, ref: str, parent: Commit, files: dict[str, bytes], message: str) -> Commit:
        commit = Commit(oid=_new_oid(), parent=parent.oid, message=message, files=files)
        repo.commits[commit.oid] = commit
        repo.refs[ref] = commit.oid
        return commit

    def _prefix(self, repo_type: str) -> str:
        return "" if repo_type == "model" else f"/{repo_type}s"


def _new_oid() -> str:
    return hashlib.sha1(uuid.uuid4().bytes).hexdigest()


_API_REPO = re.compile(r"^/api/(?P<type>models|datasets|spaces)/(?P<id>[^/]+/[^/]+)(?P<rest>/.*)?$")
_RESOLVE = re.compile(r"^(?P<prefix>/datasets|/spaces)?/(?P<id>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")


class _Handler(BaseHTTPRequestHandler):
    fake: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass  # keep test output clean; requests are recorded instead

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    def do_POST(self) -> None:
        self._dispatch("POST")

    # ---------------------------------------------------------------- plumbing

    def _dispatch(self, method: str) -> None:
        split = urlsplit(self.path)
        # Revisions such as refs/pr/1 arrive percent-encoded as one segment: split first, decode after.
        raw_path = split.path
        query = {key: values[-1] for key, values in parse_qs(split.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        payload: Any = None
        if body and "ndjson" in (self.headers.get("Content-Type") or ""):
            payload = [json.loads(line) for line in body.splitlines() if line.strip()]
        elif body:
            try:
                payload = json.loads(body)
            except ValueError:
                payload = None
        try:
            with self.fake._lock:
                status, reply, headers = self._route(method, raw_path, query, payload)
        except _HubError as error:
            status, reply = error.status, {"error": error.message, **error.body}
            headers = {"X-Error-Message": error.message, **error.headers}
            if error.code:
                headers["X-Error-Code"] = error.code
        self.fake.requests.append(RecordedRequest(method, unquote(raw_path), query, status,
                                                  _recordable(payload)))
        if isinstance(reply, bytes):
            content, content_type = reply, "application/octet-stream"
        else:
            content, content_type = json.dumps(reply).encode(), "application/json"
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(content)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(content)

    def _user(self, *, required: bool) -> tuple[str, set[str]] | None:
        header = self.headers.get("Authorization") or ""
        if not header.startswith("Bearer "):
            if required:
                raise _HubError(401, INVALID_CREDENTIALS)
            return None
        token = header.removeprefix("Bearer ").strip()
        if token not in self.fake.tokens:
            raise _HubError(401, INVALID_CREDENTIALS)
        return self.fake.tokens[token]

    def _readable_repo(self, repo_type: str, repo_id: str) -> Repo:
        user = self._user(required=False)
        repo = self.fake.repos.get((repo_type, repo_id))
        namespace = repo_id.split("/")[0]
        if repo is None or (repo.private and (user is None or namespace not in user[1])):
            # The Hub answers the same for a missing and an inaccessible private repository.
            raise _HubError(404 if user else 401, "Repository not found", code="RepoNotFound")
        return repo

    def _writable_repo(self, repo_type: str, repo_id: str) -> Repo:
        user = self._user(required=True)
        repo = self._readable_repo(repo_type, repo_id)
        if repo_id.split("/")[0] not in user[1]:
            raise _HubError(403, f"You don't have write access to {repo_id}")
        return repo

    @staticmethod
    def _revision(repo: Repo, revision: str) -> str:
        try:
            return repo.resolve(revision)
        except KeyError:
            raise _HubError(404, f"Invalid rev id: {revision}", code="RevisionNotFound") from None

    # ---------------------------------------------------------------- routes

    def _route(self, method: str, raw_path: str, query: dict, payload: Any) -> tuple[int, Any, dict]:
        path = unquote(raw_path)
        if method == "POST" and path == "/api/repos/create":
            return self._create_repo(payload or {})
        if method == "POST" and path == "/api/validate-yaml":
            return self._validate_yaml(payload or {})
        if match := _API_REPO.match(raw_path):
            repo_type = match["type"][:-1]
            repo_id = unquote(match["id"])
            rest = [unquote(part) for part in (match["rest"] or "").split("/")[1:]]
            return self._repo_api(method, repo_type, repo_id, rest, query, payload)
        if method in ("GET", "HEAD") and (match := _RESOLVE.match(raw_path)):
            repo_type = (match["prefix"] or "/models")[1:-1]
            return self._resolve(repo_type, unquote(match["id"]), unquote(match["rev"]), unquote(match["path"]))
        raise _HubError(404, f"no route for {method} {path}")

    def _create_repo(self, payload: dict) -> tuple[int, Any, dict]:
        user, writable = self._user(required=True)
        namespace = payload.get("organization") or user
        known = {name for _, spaces in self.fake.tokens.values() for name in spaces}
        if namespace not in known:
            raise _HubError(404, f"Organization {namespace} not found")
        if namespace not in writable:
            raise _HubError(403, f"You don't have the rights to create a dataset under the namespace \"{namespace}\"")
        repo_type = payload.get("type") or "model"
        repo_id = f"{namespace}/{payload['name']}"
        url = f"{self.fake.url}{self.fake._prefix(repo_type)}/{repo_id}"
        if (repo_type, repo_id) in self.fake.repos:
            # huggingface_hub's create_repo(exist_ok=True) reads the URL from this 409's body
            raise _HubError(409, f"You already created this {repo_type} repo", body={"url": url})
        self.fake._create(repo_id, repo_type, private=payload.get("visibility") == "private")
        return 200, {"url": url, "name": repo_id, "id": repo_id}, {}

    def _validate_yaml(self, payload: dict) -> tuple[int, Any, dict]:
        content = payload.get("content", "")
        match = re.match(r"^---\n(.*?)\n---\n", content, re.DOTALL)
        if match is None:
            return 200, {"errors": [], "warnings": [{"message": "empty or missing yaml metadata in repo card"}]}, {}
        try:
            metadata = yaml.safe_load(match.group(1))
        except yaml.YAMLError as exc:
            return 400, {"errors": [{"message": f"invalid YAML: {exc}"}], "warnings": []}, {}
        if not isinstance(metadata, dict):
            return 400, {"errors": [{"message": "metadata must be a mapping"}], "warnings": []}, {}
        return 200, {"errors": [], "warnings": []}, {}

    def _repo_api(self, method: str, repo_type: str, repo_id: str, rest: list[str], query: dict,
                  payload: Any) -> tuple[int, Any, dict]:
        action = rest[0] if rest else ""
        if method == "GET" and action in ("", "revision"):
            repo = self._readable_repo(repo_type, repo_id)
            return 200, self._info(repo, rest[1] if len(rest) > 1 else "main"), {}
        if method == "GET" and action == "tree":
            repo = self._readable_repo(repo_type, repo_id)
            return 200, self._tree(repo, rest[1], "/".join(rest[2:]), query.get("recursive") in ("True", "true", "1")), {}
        if method == "GET" and action == "refs":
            repo = self._readable_repo(repo_type, repo_id)
            return 200, self._refs(repo), {}
        if method == "POST" and action == "branch":
            return self._create_branch(self._writable_repo(repo_type, repo_id), rest[1], payload or {})
        if method == "POST" and action == "preupload":
            repo = self._writable_repo(repo_type, repo_id)
            files = repo.commits[self._revision(repo, rest[1])].files
            return 200, {"files": [{"path": entry["path"], "uploadMode": "regular", "shouldIgnore": False,
                                    "oid": git_blob_id(files[entry["path"]]) if entry["path"] in files else None}
                                   for entry in payload["files"]]}, {}
        if method == "POST" and action == "commit":
            return self._commit(self._writable_repo(repo_type, repo_id), rest[1], query, payload or [])
        raise _HubError(404, f"no route for {method} /api/{repo_type}s/{repo_id}/{'/'.join(rest)}")

    def _info(self, repo: Repo, revision: str) -> dict:
        oid = self._revision(repo, revision)
        author = repo.repo_id.split("/")[0]
        return {"_id": uuid.uuid4().hex[:24], "id": repo.repo_id, "author": author, "sha": oid,
                "private": repo.private, "gated": False, "disabled": False, "downloads": 0, "likes": 0, "tags": [],
                "lastModified": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
                "siblings": [{"rfilename": name} for name in sorted(repo.commits[oid].files)]}

    def _tree(self, repo: Repo, revision: str, folder: str, recursive: bool) -> list[dict]:
        files = repo.commits[self._revision(repo, revision)].files
        prefix = f"{folder.strip('/')}/" if folder.strip("/") else ""
        if prefix and not any(name.startswith(prefix) for name in files):
            raise _HubError(404, f"{folder} does not exist on {revision}", code="EntryNotFound")
        entries: dict[str, dict] = {}
        for name, content in sorted(files.items()):
            if not name.startswith(prefix):
                continue
            parts = name[len(prefix):].split("/")
            for depth in range(1, len(parts)):
                if depth > 1 and not recursive:
                    break
                folder_path = prefix + "/".join(parts[:depth])
                entries.setdefault(folder_path, {"type": "directory", "oid": git_blob_id(folder_path.encode()),
                                                 "size": 0, "path": folder_path})
            if recursive or len(parts) == 1:
                entries[name] = {"type": "file", "oid": git_blob_id(content), "size": len(content), "path": name}
        return list(entries.values())

    def _refs(self, repo: Repo) -> dict:
        def ref(name: str, oid: str) -> dict:
            return {"name": name, "ref": name if name.startswith("refs/") else f"refs/heads/{name}",
                    "targetCommit": oid}

        return {"branches": [ref(name, oid) for name, oid in repo.refs.items() if not name.startswith("refs/pr/")],
                "converts": [], "tags": [],
                "pullRequests": [ref(name, oid) for name, oid in repo.refs.items() if name.startswith("refs/pr/")]}

    def _create_branch(self, repo: Repo, branch: str, payload: dict) -> tuple[int, Any, dict]:
        if branch in repo.refs:
            raise _HubError(409, f"Reference already exists: refs/heads/{branch}")
        repo.refs[branch] = self._revision(repo, payload.get("startingPoint") or "main")
        return 200, {}, {}

    def _commit(self, repo: Repo, revision: str, query: dict, items: list[dict]) -> tuple[int, Any, dict]:
        parent = repo.commits[self._revision(repo, revision)]
        if revision not in repo.refs:
            raise _HubError(400, f"Cannot commit on {revision}: not a branch", code="RevisionNotFound")
        header = next((item["value"] for item in items if item["key"] == "header"), None)
        if header is None or not header.get("summary"):
            raise _HubError(400, "commit header with a summary is required")
        if header.get("parentCommit") and header["parentCommit"] != parent.oid:
            raise _HubError(412, "A commit has happened since. Please refresh and try again.")
        files = dict(parent.files)
        for item in items:
            key, value = item["key"], item["value"]
            if key == "file":
                files[value["path"]] = base64.b64decode(value["content"])
            elif key == "deletedFile":
                if value["path"] not in files:
                    raise _HubError(404, "A file with this name doesn't exist", code="EntryNotFound")
                del files[value["path"]]
            elif key == "deletedFolder":
                folder = value["path"].rstrip("/") + "/"
                files = {name: content for name, content in files.items() if not name.startswith(folder)}
            elif key == "lfsFile":
                raise _HubError(400, "this fake Hub stores no LFS objects (its preupload never answers lfs)")
        message = header["summary"]
        base = f"{self.fake.url}{self.fake._prefix(repo.repo_type)}/{repo.repo_id}"
        pull_url = None
        if query.get("create_pr") == "1":
            pull = PullRequest(number=len(repo.pulls) + 1, title=message, target_branch=revision)
            repo.pulls.append(pull)
            commit = self.fake._commit(repo, pull.ref, parent, files, message)
            pull_url = f"{base}/discussions/{pull.number}"
        else:
            commit = self.fake._commit(repo, revision, parent, files, message)
        return 200, {"success": True, "commitOid": commit.oid, "commitUrl": f"{base}/commit/{commit.oid}",
                     "pullRequestUrl": pull_url}, {}

    def _resolve(self, repo_type: str, repo_id: str, revision: str, path: str) -> tuple[int, Any, dict]:
        repo = self._readable_repo(repo_type, repo_id)
        oid = self._revision(repo, revision)
        files = repo.commits[oid].files
        if path not in files:
            raise _HubError(404, "Entry not found", code="EntryNotFound", headers={"X-Repo-Commit": oid})
        content = files[path]
        return 200, content, {"X-Repo-Commit": oid, "ETag": f'"{git_blob_id(content)}"', "Accept-Ranges": "bytes"}


def _recordable(payload: Any) -> Any:
    """The payload as recorded: file contents of a commit are replaced by their size."""
    if isinstance(payload, list):
        recorded = []
        for item in payload:
            value = dict(item.get("value", {}))
            if "content" in value:
                value["content"] = f"<{len(base64.b64decode(value['content']))} bytes>"
            recorded.append({"key": item.get("key"), "value": value})
        return recorded
    return payload
