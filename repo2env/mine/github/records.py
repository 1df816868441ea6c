"""GitHub's JSON (GraphQL nodes, REST items) mapped to the miner's records: pure functions."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from repo2env.mine.source import Comment, Issue, PullRequest

#: The anonymous author GitHub shows for deleted accounts.
GHOST = "ghost"


def pull_from_graphql(node: dict[str, Any], repo: str, default_branch: str) -> tuple[PullRequest, list[Issue]]:
    """A merged PR of a ``MergedPullRequests`` page, and the issues of ``repo`` it closes.

    Issues of other repositories a PR closes are left out: their numbers mean nothing here.
    """
    commits = [entry["commit"] for entry in (node.get("commits") or {}).get("nodes") or [] if entry]
    dates = [c.get("authoredDate") or c.get("committedDate") for c in commits]
    known_dates = [d for d in dates if d]
    issues: list[Issue] = []
    linked: list[int] = []
    for issue_node in (node.get("closingIssuesReferences") or {}).get("nodes") or []:
        if not issue_node:
            continue
        owner_repo = (issue_node.get("repository") or {}).get("nameWithOwner") or repo
        if owner_repo.lower() != repo.lower():
            continue
        issue = issue_from_graphql(issue_node)
        issues.append(issue)
        if issue.number not in linked:
            linked.append(issue.number)
    merge_commit = node.get("mergeCommit") or {}
    pull = PullRequest(
        number=int(node["number"]),
        title=node.get("title") or "",
        body=node.get("body") or "",
        created_at=node["createdAt"],
        merged=True,
        merged_at=node.get("mergedAt"),
        merge_commit=merge_commit.get("oid"),
        head_sha=node.get("headRefOid"),
        base_ref=node.get("baseRefName") or default_branch,
        commit_messages=tuple(c.get("message") or "" for c in commits),
        first_commit_at=min(known_dates, key=datetime.fromisoformat) if known_dates else None,
        linked_issues=tuple(linked),
    )
    return pull, issues


def pull_from_rest(raw: dict[str, Any], default_branch: str) -> PullRequest:
    """A closed PR of the REST list, ``merged`` set; its linked issues are unknown (``None``)."""
    merged_at = raw.get("merged_at")
    return PullRequest(
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


def issue_from_graphql(node: dict[str, Any]) -> Issue:
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


def issue_from_rest(raw: dict[str, Any], comments: list[Comment]) -> Issue:
    return Issue(
        number=int(raw["number"]),
        title=raw.get("title") or "",
        body=raw.get("body") or "",
        created_at=raw.get("created_at") or "",
        is_pull_request="pull_request" in raw,
        comments=tuple(comments),
    )


def comment_from_rest(raw: dict[str, Any]) -> Comment:
    return Comment(
        author=(raw.get("user") or {}).get("login") or GHOST,
        body=raw.get("body") or "",
        created_at=raw.get("created_at") or "",
    )
