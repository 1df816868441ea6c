"""The demo's ``issues.json``: issues, PRs and comments as GitHub's REST API returns them.

The document has four keys: ``repository`` (``owner/name``), ``issues`` (``GET /issues?state=all``,
PRs included with their ``pull_request`` key, newest first), ``pulls`` (``GET /pulls?state=all``,
newest first) and ``comments`` (``GET /issues/comments``, oldest first). A local fake GitHub
server serves these objects, so their shapes follow the real API. Ids are fixed fakes, so two
builds produce the same document.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from repo2env.demo.spec import CommentSpec, IssueSpec, Person, PullSpec

_API = "https://api.github.com"
_WEB = "https://github.com"
_ISSUE_ID_BASE = 2_100_000_000
_PULL_ID_BASE = 1_700_000_000
_COMMENT_ID_BASE = 1_900_000_000
_REPO_ID = 740_000_001
_OWNER_ID = 150_000_001
_HEAD_SHA_TOKEN = re.compile(r"<head-sha-of-pull-(\d+)>")


@dataclass(frozen=True)
class PullRefs:
    """The commits the builder made for one PR.

    ``base_sha`` is ``main``'s tip when the PR was opened; ``merge_commit_sha`` is the merge or
    squash commit on ``main`` (``None`` for an unmerged PR).
    """

    head_sha: str
    base_sha: str
    merge_commit_sha: str | None


def render_issues_json(
    repo: str,
    issues: Sequence[IssueSpec],
    pulls: Sequence[PullSpec],
    refs: Mapping[int, PullRefs],
    *,
    id_offset: int = 0,
) -> dict[str, Any]:
    """Return the ``issues.json`` document for ``repo`` (see the module docstring for its shape).

    An issue is closed (``state_reason`` ``"completed"``) at the merge time of the first merged
    PR whose ground truth links it; otherwise it stays open. ``<head-sha-of-pull-N>`` tokens in
    texts become PR N's head commit SHA. ``id_offset`` is added to every fake id but the owner's
    (one organisation owns every demo), so two demos' documents never share an id.
    """
    renderer = _Renderer(repo, refs, id_offset)
    closed_at: dict[int, str] = {}
    for pull in sorted(pulls, key=lambda pull: pull.closed_at):
        if pull.truth.merge_style != "unmerged":
            for number in pull.truth.linked_issues:
                closed_at.setdefault(number, pull.closed_at)

    comment_ids = _comment_ids(issues, pulls, _COMMENT_ID_BASE + id_offset)
    issue_objects = [renderer.issue(issue, closed_at.get(issue.number)) for issue in issues]
    issue_objects += [renderer.pull_as_issue(pull) for pull in pulls]
    issue_objects.sort(key=lambda issue: issue["number"], reverse=True)
    pull_objects = sorted((renderer.pull(pull) for pull in pulls), key=lambda pull: -pull["number"])
    comment_objects = [
        renderer.comment(number, comment, comment_ids[number, comment]) for number, comment in comment_ids
    ]
    comment_objects.sort(key=lambda comment: (comment["created_at"], comment["id"]))
    return {"repository": repo, "issues": issue_objects, "pulls": pull_objects, "comments": comment_objects}


def _comment_ids(
    issues: Sequence[IssueSpec], pulls: Sequence[PullSpec], id_base: int
) -> dict[tuple[int, CommentSpec], int]:
    # GitHub's comment ids grow with time, whichever issue or PR the comment is on.
    located = [(issue.number, comment) for issue in issues for comment in issue.comments]
    located += [(pull.number, comment) for pull in pulls for comment in pull.comments]
    located.sort(key=lambda item: (item[1].created_at, item[0]))
    return {item: id_base + index for index, item in enumerate(located, start=1)}


class _Renderer:
    def __init__(self, repo: str, refs: Mapping[int, PullRefs], id_offset: int) -> None:
        self._repo = repo
        self._refs = refs
        self._id_offset = id_offset
        owner, name = repo.split("/", 1)
        self._name = name
        repo_id = _REPO_ID + id_offset
        self._owner = {
            "login": owner,
            "id": _OWNER_ID,
            "node_id": f"O_kgDO{_OWNER_ID}",
            "type": "Organization",
            "site_admin": False,
            "url": f"{_API}/users/{owner}",
            "html_url": f"{_WEB}/{owner}",
        }
        self._repo_object = {
            "id": repo_id,
            "node_id": f"R_kgDO{repo_id}",
            "name": name,
            "full_name": repo,
            "private": False,
            "owner": self._owner,
            "html_url": f"{_WEB}/{repo}",
            "url": f"{_API}/repos/{repo}",
            "default_branch": "main",
        }

    def _text(self, text: str) -> str:
        return _HEAD_SHA_TOKEN.sub(lambda match: self._refs[int(match.group(1))].head_sha, text)

    def user(self, person: Person) -> dict[str, Any]:
        return {
            "login": person.login,
            "id": person.user_id,
            "node_id": f"U_kgDO{person.user_id}",
            "type": "User",
            "site_admin": False,
            "url": f"{_API}/users/{person.login}",
            "html_url": f"{_WEB}/{person.login}",
        }

    def _issue_fields(
        self, number: int, author: Person, title: str, body: str, created_at: str
    ) -> dict[str, Any]:
        api = f"{_API}/repos/{self._repo}/issues/{number}"
        return {
            "url": api,
            "repository_url": f"{_API}/repos/{self._repo}",
            "comments_url": f"{api}/comments",
            "id": _ISSUE_ID_BASE + self._id_offset + number,
            "node_id": f"I_kwDO{self._name}{number:04d}",
            "number": number,
            "title": title,
            "user": self.user(author),
            "labels": [],
            "locked": False,
            "assignee": None,
            "assignees": [],
            "created_at": created_at,
            "author_association": author.association,
            "body": self._text(body),
        }

    def issue(self, issue: IssueSpec, closed_at: str | None) -> dict[str, Any]:
        fields = self._issue_fields(issue.number, issue.author, issue.title, issue.body, issue.created_at)
        times = [issue.created_at, *(comment.created_at for comment in issue.comments)]
        fields.update(
            html_url=f"{_WEB}/{self._repo}/issues/{issue.number}",
            state="closed" if closed_at else "open",
            state_reason="completed" if closed_at else None,
            comments=len(issue.comments),
            updated_at=max([*times, closed_at or issue.created_at]),
            closed_at=closed_at,
        )
        return fields

    def pull_as_issue(self, pull: PullSpec) -> dict[str, Any]:
        fields = self._issue_fields(pull.number, pull.author, pull.title, pull.body, pull.created_at)
        fields.update(
            html_url=f"{_WEB}/{self._repo}/pull/{pull.number}",
            state="closed",
            state_reason=None,
            comments=len(pull.comments),
            updated_at=_updated_at(pull),
            closed_at=pull.closed_at,
            pull_request={
                "url": f"{_API}/repos/{self._repo}/pulls/{pull.number}",
                "html_url": f"{_WEB}/{self._repo}/pull/{pull.number}",
                "diff_url": f"{_WEB}/{self._repo}/pull/{pull.number}.diff",
                "patch_url": f"{_WEB}/{self._repo}/pull/{pull.number}.patch",
                "merged_at": _merged_at(pull),
            },
        )
        return fields

    def pull(self, pull: PullSpec) -> dict[str, Any]:
        refs = self._refs[pull.number]
        html = f"{_WEB}/{self._repo}/pull/{pull.number}"
        return {
            "url": f"{_API}/repos/{self._repo}/pulls/{pull.number}",
            "id": _PULL_ID_BASE + self._id_offset + pull.number,
            "node_id": f"PR_kwDO{self._name}{pull.number:04d}",
            "html_url": html,
            "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch",
            "issue_url": f"{_API}/repos/{self._repo}/issues/{pull.number}",
            "number": pull.number,
            "state": "closed",
            "locked": False,
            "title": pull.title,
            "user": self.user(pull.author),
            "body": self._text(pull.body),
            "created_at": pull.created_at,
            "updated_at": _updated_at(pull),
            "closed_at": pull.closed_at,
            "merged_at": _merged_at(pull),
            "merge_commit_sha": refs.merge_commit_sha,
            "draft": False,
            "head": {
                "label": f"{pull.author.login}:{pull.branch}",
                "ref": pull.branch,
                "sha": refs.head_sha,
                "user": self.user(pull.author),
                "repo": self._repo_object,
            },
            "base": {
                "label": f"{self._owner['login']}:main",
                "ref": "main",
                "sha": refs.base_sha,
                "user": self._owner,
                "repo": self._repo_object,
            },
            "author_association": pull.author.association,
        }

    def comment(self, number: int, comment: CommentSpec, comment_id: int) -> dict[str, Any]:
        kind = "pull" if self._refs.get(number) else "issues"
        return {
            "url": f"{_API}/repos/{self._repo}/issues/comments/{comment_id}",
            "html_url": f"{_WEB}/{self._repo}/{kind}/{number}#issuecomment-{comment_id}",
            "issue_url": f"{_API}/repos/{self._repo}/issues/{number}",
            "id": comment_id,
            "node_id": f"IC_kwDO{self._name}{comment_id}",
            "user": self.user(comment.author),
            "created_at": comment.created_at,
            "updated_at": comment.created_at,
            "author_association": comment.author.association,
            "body": self._text(comment.body),
        }


def _merged_at(pull: PullSpec) -> str | None:
    return None if pull.truth.merge_style == "unmerged" else pull.closed_at


def _updated_at(pull: PullSpec) -> str:
    return max([pull.closed_at, *(comment.created_at for comment in pull.comments)])
