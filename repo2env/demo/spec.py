"""The vocabulary the demo histories are written in: people, file changes, commits, issues and PRs.

Each demo describes its history with these records, whatever its language:
:mod:`repo2env.demo.history` textkit's (Python), :mod:`repo2env.demo.fmtkit.history` fmtkit's
(JavaScript/TypeScript). :mod:`repo2env.demo.builder` replays a :class:`DemoHistory` into a git
repository. :class:`DemoPull` and :class:`PartialFix` are also the ground truth that the tests of
later stages compare with.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Literal

MergeStyle = Literal["merge", "squash", "unmerged"]


@dataclass(frozen=True)
class Person:
    """A GitHub user who commits, opens issues or comments (``user_id`` is a fixed fake id)."""

    name: str
    email: str
    login: str
    user_id: int
    association: str  #: GitHub's ``author_association`` for this person in the demo repository

    @property
    def git_identity(self) -> str:
        """``Name <email>``, as git prints it."""
        return f"{self.name} <{self.email}>"


@dataclass(frozen=True)
class Edit:
    """Replace the one occurrence of ``old`` in the file at ``path`` with ``new``."""

    path: str
    old: str
    new: str

    def apply(self, text: str) -> str:
        """Return ``text`` with ``old`` replaced; raises ``ValueError`` unless ``old`` occurs once.

        Requiring exactly one occurrence turns a stale edit (history changed under it) into a
        loud error instead of a silently different demo repository.
        """
        count = text.count(self.old)
        if count != 1:
            raise ValueError(f"edit of {self.path} expects its old text once, found it {count} times")
        return text.replace(self.old, self.new)


@dataclass(frozen=True)
class Write:
    """Create the file at ``path`` (or overwrite it) with ``content``."""

    path: str
    content: str


FileChange = Edit | Write


@dataclass(frozen=True)
class CommitSpec:
    """One commit: its message, author, author date (``YYYY-MM-DDTHH:MM:SSZ``) and changes."""

    message: str
    author: Person
    date: str
    changes: tuple[FileChange, ...]


@dataclass(frozen=True)
class CommentSpec:
    """A comment on an issue or PR."""

    author: Person
    created_at: str
    body: str


@dataclass(frozen=True)
class IssueSpec:
    """A plain issue (not a PR). It is closed when a merged PR lists it in ``linked_issues``."""

    number: int
    title: str
    body: str
    author: Person
    created_at: str
    comments: tuple[CommentSpec, ...] = ()


@dataclass(frozen=True)
class PartialFix:
    """A patch that fixes only part of a PR's bug: ground truth for reward variance.

    ``patch`` is a ``git diff``-style unified diff that ``git apply`` accepts at the PR's base
    commit and touches only non-test source files; ``passes`` is the proper, non-empty subset of
    the PR's ``fail_to_pass`` ids it makes pass (the others keep failing).
    """

    name: str
    patch: str
    passes: tuple[str, ...]


@dataclass(frozen=True)
class DemoPull:
    """What a correct pipeline should conclude about one demo PR.

    ``linked_issues`` are the real issues the PR closes (not PRs, not mere mentions).
    ``expected_bucket`` is ``"kept"`` or the reason the PR is skipped: ``"no_linked_issue"``,
    ``"no_test_changes"``, ``"no_source_change"`` or ``"not_merged"``. Test ids are written as the
    demo's language writes them (pytest's node ids for textkit; ``<file>::<describe> > <test>``
    for fmtkit). ``fail_to_pass`` ids fail at the base commit with the PR's test files applied
    and pass after the merge; ``pass_to_pass`` ids are the other tests of the test files the PR
    touches, passing both before and after; ``flaky`` ids pass or fail from run to run after the
    merge (textkit's with ``PYTHONHASHSEED``, fmtkit's with V8's ``--random-seed``).
    ``leaks_fix`` says the linked issue's text gives the fix away. ``stub_earns`` says the PR's
    tests give reward to a stub of the functions it changes (``return []`` or ``return ""``
    passes one of them): validation's stub rollouts catch it. A kept PR whose tests all pass
    before its fix has no ``fail_to_pass``: validation finds nothing to reward. ``interface``
    names what the PR's tests use that its fix introduces and its issue never names (validation
    lists it in the instruction's Interface section); ``untested_hunks`` the 1-based hunks of the
    fix that no test needs (the fix without one still earns the full reward).
    """

    number: int
    title: str
    merge_style: MergeStyle
    linked_issues: tuple[int, ...]
    expected_bucket: str
    fail_to_pass: tuple[str, ...] = ()
    pass_to_pass: tuple[str, ...] = ()
    flaky: tuple[str, ...] = ()
    partial_fixes: tuple[PartialFix, ...] = ()
    leaks_fix: bool = False
    stub_earns: bool = False
    interface: tuple[str, ...] = ()
    untested_hunks: tuple[int, ...] = ()

    @property
    def expected_reasons(self) -> tuple[str, ...]:
        """The reasons validation's default policy rejects this kept PR for (empty: accepted).

        A PR without ``fail_to_pass`` is ``no_f2p``; one whose tests a stub passes is
        ``stub_passes``. A leaking issue is flagged, not rejected. ``()`` for PRs mining skips.
        """
        if self.expected_bucket != "kept":
            return ()
        if not self.fail_to_pass:
            return ("no_f2p",)
        return ("stub_passes",) if self.stub_earns else ()


@dataclass(frozen=True)
class PullSpec:
    """A PR as it happened: ``truth`` plus who opened it, its branch, body, commits and dates.

    The branch is ``<author login>/<branch>`` in the demo repository. ``closed_at`` is the merge
    (or squash) time for a merged PR and the closing time of an unmerged one; ``merger`` lands it.
    """

    truth: DemoPull
    author: Person
    branch: str
    body: str
    created_at: str
    closed_at: str
    commits: tuple[CommitSpec, ...]
    merger: Person
    comments: tuple[CommentSpec, ...] = field(default=())

    @property
    def number(self) -> int:
        """The PR number (shared sequence with issues)."""
        return self.truth.number

    @property
    def title(self) -> str:
        """The PR title."""
        return self.truth.title

    @property
    def ref(self) -> str:
        """The branch name in the demo repository, ``<login>/<branch>``."""
        return f"{self.author.login}/{self.branch}"


@dataclass(frozen=True)
class MainCommit:
    """A commit pushed straight to ``main`` (initial commits, releases)."""

    commit: CommitSpec


@dataclass(frozen=True)
class OpenPull:
    """PR ``number`` is branched off ``main``'s tip at this point and its commits are made."""

    number: int


@dataclass(frozen=True)
class LandPull:
    """PR ``number`` is merged (``--no-ff``) or squashed onto ``main`` at this point."""

    number: int


Step = MainCommit | OpenPull | LandPull

#: GitHub commits merges and squashes made in its web interface under this identity.
GITHUB_WEB = Person("GitHub", "noreply@github.com", "web-flow", 19864447, "NONE")


@dataclass(frozen=True)
class DemoHistory:
    """One demo repository's whole story, which :func:`~repo2env.demo.builder.build_demo` replays.

    ``language`` is the language the repository is written in (``python``, ``javascript``).
    ``issues`` and ``pulls`` share one number sequence; ``timeline`` is the order in which
    commits, PR branches and landings happen on ``main``. ``id_offset`` is added to the fake
    GitHub ids of ``issues.json`` so that two demos never share an id.
    """

    repo: str
    language: str
    issues: tuple[IssueSpec, ...]
    pulls: tuple[PullSpec, ...]
    timeline: tuple[Step, ...]
    id_offset: int = 0

    @property
    def truth(self) -> tuple[DemoPull, ...]:
        """The ground truth of every PR, in the order of :attr:`pulls`."""
        return tuple(pull.truth for pull in self.pulls)

    @property
    def first_date(self) -> str:
        """The author date of the first commit on ``main``."""
        first = next(step for step in self.timeline if isinstance(step, MainCommit))
        return first.commit.date


def file_text(literal: str) -> str:
    """Return a triple-quoted file literal without the newline that follows its opening quotes."""
    return literal[1:] if literal.startswith("\n") else literal


def apply_edits(text: str, edits: tuple[Edit, ...]) -> str:
    """Return ``text`` with ``edits`` applied in order (each must match exactly once)."""
    for edit in edits:
        text = edit.apply(text)
    return text


def file_patch(path: str, before: str, after: str) -> str:
    """Return the ``git diff``-format patch turning ``before`` into ``after`` at ``path``.

    Both texts must end with a newline (every demo file does), so no ``\\ No newline`` markers
    are needed and ``git apply`` takes the result as is.
    """
    if not before.endswith("\n") or not after.endswith("\n"):
        raise ValueError(f"{path}: demo files must end with a newline")
    hunks = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"a/{path}",
        tofile=f"b/{path}",
        n=3,
    )
    return f"diff --git a/{path} b/{path}\n" + "".join(hunks)


def partial_fix(name: str, base_files: dict[str, str], edits: tuple[Edit, ...], passes: tuple[str, ...]) -> PartialFix:
    """A :class:`PartialFix` made of ``edits`` to files whose text at the PR's base is in ``base_files``."""
    patches = []
    for path in dict.fromkeys(edit.path for edit in edits):
        before = base_files[path]
        after = apply_edits(before, tuple(edit for edit in edits if edit.path == path))
        patches.append(file_patch(path, before, after))
    return PartialFix(name=name, patch="".join(patches), passes=passes)
