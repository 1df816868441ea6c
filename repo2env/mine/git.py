"""Local history as a :class:`~repo2env.mine.source.Source`: offline, no token.

PRs are recognised the way GitHub writes them into history: merge commits ``Merge pull request #N
from user/branch`` (head = second parent), squash commits ``Title (#N)``, and ``refs/pull/N/head``
refs (a PR with such a ref that never reached the branch is an unmerged PR). Issue and PR texts
come from an ``issues.json`` in GitHub's REST shape when one is given (the demo ships one).
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import git

from repo2env.errors import InputError, SourceError
from repo2env.mine.history import GitHistory
from repo2env.mine.source import Comment, Issue, PullRequest

_MERGE_SUBJECT = re.compile(r"^Merge pull request #(\d+) from (\S+)")
_SQUASH_SUBJECT = re.compile(r"^(.*\S)\s+\(#(\d+)\)\s*$")
_REMOTE_NAME = re.compile(r"[:/]([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(?:\.git)?/?$")


def looks_like_url(spec: str) -> bool:
    """Whether ``--repo`` names a URL to clone (as opposed to a path or owner/name)."""
    return "://" in spec or spec.startswith("git@")


class GitSource:
    """Merged PRs read from a local clone (or a URL cloned into ``workdir``)."""

    def __init__(self, location: str | Path, *, issues_path: Path | None = None, workdir: Path | None = None,
                 repo: str | None = None) -> None:
        location = str(location)
        if looks_like_url(location):
            if workdir is None:
                raise InputError("a workdir is needed to clone a URL")
            self.path = _clone(location, workdir / "clone")
        else:
            self.path = Path(location).expanduser()
            if not self.path.exists():
                raise SourceError(f"no such path: {self.path}", hint="pass an existing clone, a URL or owner/name")
        self.history = GitHistory(self.path)
        self.issues_data = _load_issues(issues_path) if issues_path else None
        self.repo = repo or self._repo_name()
        self._issues, self._pull_objects, self._comments = self._index_issues()

    def clone_path(self) -> Path:
        """The local repository (read-only use)."""
        return self.path

    # --- naming --------------------------------------------------------------------------------

    def _repo_name(self) -> str:
        if self.issues_data and isinstance(self.issues_data.get("repository"), str):
            return self.issues_data["repository"]
        try:
            url = self.history.repo.remotes.origin.url
            match = _REMOTE_NAME.search(url)
            if match and not Path(url).exists():
                return f"{match.group(1)}/{match.group(2)}"
        except (AttributeError, IndexError, ValueError):
            pass
        name = re.sub(r"[^A-Za-z0-9_.-]", "-", self.path.resolve().name.removesuffix(".git")) or "repo"
        return f"local/{name}"

    # --- issues.json ---------------------------------------------------------------------------

    def _index_issues(self) -> tuple[dict[int, dict], dict[int, dict], dict[int, list[Comment]]]:
        if not self.issues_data:
            return {}, {}, {}
        issues = {int(item["number"]): item for item in self.issues_data.get("issues", [])}
        pulls = {int(item["number"]): item for item in self.issues_data.get("pulls", [])}
        comments: dict[int, list[Comment]] = {}
        for item in self.issues_data.get("comments", []):
            number = int(str(item.get("issue_url", "")).rstrip("/").rsplit("/", 1)[-1])
            comments.setdefault(number, []).append(
                Comment(author=(item.get("user") or {}).get("login", ""), body=item.get("body") or "",
                        created_at=item.get("created_at", ""))
            )
        return issues, pulls, comments

    def issue(self, number: int) -> Issue | None:
        """The issue from issues.json, or None (no file, or no such issue)."""
        item = self._issues.get(number)
        if item is None:
            return None
        comments = tuple(sorted(self._comments.get(number, []), key=lambda comment: comment.created_at))
        return Issue(
            number=number,
            title=item.get("title") or "",
            body=item.get("body") or "",
            created_at=item.get("created_at", ""),
            is_pull_request="pull_request" in item or number in self._pull_objects,
            comments=comments,
        )

    # --- pulls ---------------------------------------------------------------------------------

    def pulls(self) -> Iterator[PullRequest]:
        """Merged PRs from the branch's history, newest first, then unmerged ``refs/pull`` heads."""
        history = self.history
        seen: set[int] = set()
        for sha in reversed(history.mainline):
            commit = history.commits[sha]
            subject = commit.subject
            merge = _MERGE_SUBJECT.match(subject) if len(commit.parents) == 2 else None
            squash = _SQUASH_SUBJECT.match(subject) if merge is None and len(commit.parents) == 1 else None
            if merge:
                number, head = int(merge.group(1)), commit.parents[1]
                base = history.merge_base(commit.parents[0], head)
                branch_commits = history.commits_between(base, head) if base else []
                rest = commit.message.split("\n", 1)[1].strip() if "\n" in commit.message else ""
                title, _, body = rest.partition("\n")
                squashed = False
            elif squash:
                number, head = int(squash.group(2)), sha
                branch_commits = [commit]
                title = squash.group(1)
                body = commit.message.split("\n", 1)[1].strip() if "\n" in commit.message else ""
                squashed = True
            else:
                continue
            if number in seen:  # e.g. a revert and re-land: the newest landing wins
                continue
            seen.add(number)
            messages = tuple(c.message for c in branch_commits)
            first_commit_at = min((c.author_date for c in branch_commits), default=commit.author_date)
            yield self._pull(number, title=title.strip(), body=body.strip(), merged=True, merged_at=commit.author_date,
                             merge_commit=sha, head_sha=head, squashed=squashed, commit_messages=messages,
                             first_commit_at=first_commit_at)
        for number, head in sorted(self._pull_refs().items(), reverse=True):
            if number in seen or head not in history.commits:
                continue
            commit = history.commits[head]
            yield self._pull(number, title=commit.subject, body="", merged=False, merged_at=None, merge_commit=None,
                             head_sha=head, squashed=False, commit_messages=(commit.message,),
                             first_commit_at=commit.author_date)

    def _pull(self, number: int, *, title: str, body: str, merged: bool, merged_at: str | None,
              merge_commit: str | None, head_sha: str, squashed: bool, commit_messages: tuple[str, ...],
              first_commit_at: str) -> PullRequest:
        recorded = self._pull_objects.get(number)
        if recorded:  # GitHub's own record beats what history implies
            title = recorded.get("title") or title
            body = recorded.get("body") or ""
            created_at = recorded.get("created_at") or first_commit_at
        else:
            created_at = first_commit_at
        return PullRequest(
            number=number, title=title, body=body, created_at=created_at, merged=merged, merged_at=merged_at,
            merge_commit=merge_commit, head_sha=head_sha, base_ref=self.history.branch, squashed=squashed,
            commit_messages=commit_messages, first_commit_at=first_commit_at,
        )

    def _pull_refs(self) -> dict[int, str]:
        result = subprocess.run(
            ["git", "-C", str(self.path), "for-each-ref", "--format=%(refname) %(objectname)", "refs/pull/"],
            capture_output=True, text=True,
        )
        refs = {}
        for line in result.stdout.splitlines():
            name, _, sha = line.partition(" ")
            parts = name.split("/")
            if len(parts) == 4 and parts[3] == "head" and parts[2].isdigit():
                refs[int(parts[2])] = sha
        return refs


def _load_issues(path: Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"no issues file at {path}")
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} is not valid JSON ({exc.msg}, line {exc.lineno})") from None
    if isinstance(payload, list):  # a bare list of issue objects, as GET /issues returns
        payload = {"issues": payload}
    if not isinstance(payload, dict) or not isinstance(payload.get("issues", []), list):
        raise InputError(f"{path}: expected GitHub issue objects (a list, or an object with an 'issues' list)")
    return payload


def _clone(url: str, dest: Path) -> Path:
    """A mirror clone of ``url`` (all branches and refs/pull/*), reused and fetched when present."""
    try:
        if (dest / "HEAD").exists():
            git.Repo(dest).git.fetch("--prune", "origin", "+refs/*:refs/*")
        else:
            dest.parent.mkdir(parents=True, exist_ok=True)
            git.Repo.clone_from(url, dest, mirror=True)
    except git.GitCommandError as exc:
        detail = (exc.stderr or "").strip().splitlines()
        raise SourceError(f"cannot clone {url}: {detail[-1] if detail else exc}") from None
    return dest
