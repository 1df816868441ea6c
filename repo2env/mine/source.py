"""Where merged pull requests come from: the ``Source`` interface and the records it yields.

Two sources implement it: :mod:`repo2env.mine.git` (local history, offline) and
:mod:`repo2env.mine.github` (GitHub's API through PyGithub). The miner sees only this interface, and reuses a local source's
``history`` (the commit graph it has already read) when there is one.
These records are internal to mining (plain frozen dataclasses, cheap to make by the thousand);
what leaves the stage is a :class:`repo2env.models.Task`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Comment:
    """A comment on an issue."""

    author: str
    body: str
    created_at: str


@dataclass(frozen=True, slots=True)
class Issue:
    """An issue (or, when ``is_pull_request``, a PR seen through the issues API)."""

    number: int
    title: str
    body: str
    created_at: str
    is_pull_request: bool = False
    comments: tuple[Comment, ...] = ()


@dataclass(frozen=True, slots=True)
class PullRequest:
    """A pull request as far as mining needs it.

    ``merge_commit`` is the commit that landed the PR on the base branch (a merge commit whose
    second parent is ``head_sha``, or a squash commit). ``linked_issues`` is what the source knows
    for sure (GitHub's ``closingIssuesReferences``); ``None`` means "parse the texts".
    """

    number: int
    title: str
    body: str
    created_at: str
    merged: bool
    merged_at: str | None = None
    merge_commit: str | None = None
    head_sha: str | None = None
    base_ref: str = "main"
    squashed: bool = False
    commit_messages: tuple[str, ...] = ()
    first_commit_at: str | None = None
    linked_issues: tuple[int, ...] | None = None
    #: Why a PR with ``merged`` False counts as unmerged (the funnel's ``not_merged`` detail).
    unmerged_reason: str = ""
    extra: dict[str, str] = field(default_factory=dict, compare=False)


class Source(Protocol):
    """A repository's merged PRs and issues, plus a local clone of its code."""

    repo: str  #: owner/name

    def clone_path(self) -> Path:
        """A local clone, bare or not, holding every commit the PRs need (``refs/pull/*/head`` too)."""
        ...

    def pulls(self) -> Iterator[PullRequest]:
        """Every PR the source knows, newest first or oldest first (the miner does not care)."""
        ...

    def issue(self, number: int) -> Issue | None:
        """The issue ``number`` with its comments, or ``None`` when the source has no such issue."""
        ...
