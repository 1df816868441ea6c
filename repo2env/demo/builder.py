"""Replay a demo's history into a real git repository, deterministically.

Every commit gets a fixed author, committer and date, and git runs isolated from the host's
global and system configuration (no signing, no hooks, no templates, no ``autocrlf``), so two
builds anywhere give the same commit SHAs.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import git

from repo2env.demo.github_json import PullRefs, render_issues_json
from repo2env.demo.spec import (
    GITHUB_WEB,
    CommitSpec,
    DemoHistory,
    DemoPull,
    Edit,
    FileChange,
    LandPull,
    MainCommit,
    OpenPull,
    Person,
    PullSpec,
    Step,
)
from repo2env.errors import InputError

#: Repository-local settings that pin whatever a host's configuration could change.
_REPO_CONFIG = {
    "init.defaultBranch": "main",
    "commit.gpgsign": "false",
    "tag.gpgsign": "false",
    "core.autocrlf": "false",
    "core.safecrlf": "false",
    "gc.auto": "0",
    "merge.renames": "true",
}

#: The demo of each language: the module whose ``HISTORY`` tells its story.
_HISTORY_MODULES = {"python": "repo2env.demo.history", "javascript": "repo2env.demo.fmtkit.history"}
#: The languages :func:`build_demo` has a demo repository for, the default first.
DEMO_LANGUAGES: tuple[str, ...] = tuple(_HISTORY_MODULES)


@dataclass(frozen=True)
class DemoRepo:
    """A built demo: the git repository, its ``issues.json``, the ground truth of its PRs, its language."""

    path: Path
    issues_path: Path
    repo: str
    pulls: tuple[DemoPull, ...]
    language: str = "python"


def demo_history(language: str = "python") -> DemoHistory:
    """The history of the demo repository written in ``language`` (one of :data:`DEMO_LANGUAGES`).

    Raises :class:`~repo2env.errors.InputError` for a language without a demo.
    """
    module = _HISTORY_MODULES.get(language)
    if module is None:
        raise InputError(
            f"there is no demo repository in {language!r}",
            hint=f"choose one of: {', '.join(DEMO_LANGUAGES)}",
        )
    return importlib.import_module(module).HISTORY


def build_demo(dest: Path, language: str = "python") -> DemoRepo:
    """Build a demo repository in ``dest/repo`` and its issues in ``dest/issues.json``.

    ``language`` picks the demo (:data:`DEMO_LANGUAGES`): ``python`` is textkit, ``javascript``
    is fmtkit.

    The repository is non-bare, with ``main`` checked out at its last commit and a clean worktree;
    PR branches are gone (as after GitHub's "delete branch") but ``refs/pull/N/head`` points at
    every PR's head, merged or not. The same history gives the same SHAs on every machine.
    Raises :class:`~repo2env.errors.InputError` when ``dest/repo`` exists and is not empty, or
    when no demo is written in ``language``.
    """
    history = demo_history(language)
    dest = Path(dest).absolute()
    repo_dir = dest / "repo"
    if repo_dir.exists() and (not repo_dir.is_dir() or any(repo_dir.iterdir())):
        raise InputError(
            f"cannot build the demo repository: {repo_dir} already exists and is not empty",
            hint="pass an empty or new destination directory",
        )
    repo_dir.mkdir(parents=True, exist_ok=True)
    refs = _HistoryReplay(repo_dir, history.pulls, history.first_date).run(history.timeline)
    document = render_issues_json(history.repo, history.issues, history.pulls, refs, id_offset=history.id_offset)
    issues_path = dest / "issues.json"
    issues_path.write_text(
        json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return DemoRepo(
        path=repo_dir, issues_path=issues_path, repo=history.repo, pulls=history.truth, language=history.language
    )


def _git_date(iso: str) -> str:
    moment = datetime.strptime(iso, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return f"@{int(moment.timestamp())} +0000"


def _identity_env(author: Person, committer: Person, date: str) -> dict[str, str]:
    return {
        "GIT_AUTHOR_NAME": author.name,
        "GIT_AUTHOR_EMAIL": author.email,
        "GIT_AUTHOR_DATE": _git_date(date),
        "GIT_COMMITTER_NAME": committer.name,
        "GIT_COMMITTER_EMAIL": committer.email,
        "GIT_COMMITTER_DATE": _git_date(date),
    }


class _HistoryReplay:
    """Plays a timeline of commits, PR branches and landings into one repository."""

    def __init__(self, worktree: Path, pulls: Sequence[PullSpec], first_date: str) -> None:
        self._worktree = worktree
        self._pulls = {pull.number: pull for pull in pulls}
        self._refs: dict[int, PullRefs] = {}
        git_dir = worktree / ".git"
        self._git = git.Git(str(worktree))
        # Pin the repository explicitly: a GIT_DIR or GIT_INDEX_FILE inherited from a calling git
        # hook would otherwise send every command to another repository.
        self._git.update_environment(
            GIT_CONFIG_GLOBAL=os.devnull,
            GIT_CONFIG_NOSYSTEM="1",
            GIT_DIR=str(git_dir),
            GIT_WORK_TREE=str(worktree),
            GIT_INDEX_FILE=str(git_dir / "index"),
            GIT_TERMINAL_PROMPT="0",
            # Reflog entries need an identity even for checkouts; the first commit's keeps them stable.
            **_identity_env(GITHUB_WEB, GITHUB_WEB, first_date),
        )
        self._git.init("--quiet", "--initial-branch=main", "--template=")
        for key, value in _REPO_CONFIG.items():
            self._git.config(key, value)

    def run(self, timeline: Sequence[Step]) -> dict[int, PullRefs]:
        """Replay ``timeline``; return each PR's head, base and merge commits."""
        for step in timeline:
            if isinstance(step, MainCommit):
                self._commit(step.commit)
            elif isinstance(step, OpenPull):
                self._open(self._pulls[step.number])
            elif isinstance(step, LandPull):
                self._land(self._pulls[step.number])
        missing = sorted(set(self._pulls) - set(self._refs))
        if missing:
            raise ValueError(f"the demo timeline never opens PRs {missing}")
        for number, refs in sorted(self._refs.items()):
            self._git.update_ref(f"refs/pull/{number}/head", refs.head_sha)
        leftover = self._git.branch("--format=%(refname:short)").split()
        for branch in leftover:
            if branch != "main":
                self._git.branch("-D", "--quiet", branch)
        if self._git.status("--porcelain", "--untracked-files=all"):
            raise RuntimeError(f"the demo worktree at {self._worktree} is not clean after the build")
        return dict(self._refs)

    def _rev(self, ref: str) -> str:
        return self._git.rev_parse("--verify", f"{ref}^{{commit}}")

    def _apply(self, change: FileChange) -> None:
        path = self._worktree / change.path
        if isinstance(change, Edit):
            content = change.apply(path.read_text(encoding="utf-8"))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            content = change.content
        # newline="" keeps "\n" on every platform, so the blobs (and SHAs) never change.
        with path.open("w", encoding="utf-8", newline="") as handle:
            handle.write(content)

    def _commit(self, commit: CommitSpec) -> None:
        for change in commit.changes:
            self._apply(change)
        self._git.add("--all")
        self._git.commit(
            "--quiet",
            "--no-verify",
            "--cleanup=whitespace",
            "-m",
            commit.message,
            env=_identity_env(commit.author, commit.author, commit.date),
        )

    def _open(self, pull: PullSpec) -> None:
        if pull.number in self._refs:
            raise ValueError(f"the demo timeline opens PR #{pull.number} twice")
        base_sha = self._rev("main")
        self._git.checkout("--quiet", "-b", pull.ref, "main")
        for commit in pull.commits:
            self._commit(commit)
        self._refs[pull.number] = PullRefs(
            head_sha=self._rev("HEAD"), base_sha=base_sha, merge_commit_sha=None
        )
        self._git.checkout("--quiet", "main")

    def _land(self, pull: PullSpec) -> None:
        style = pull.truth.merge_style
        if pull.number not in self._refs or style == "unmerged":
            raise ValueError(f"the demo timeline lands PR #{pull.number}, which is unopened or unmerged")
        if style == "merge":
            message = f"Merge pull request #{pull.number} from {pull.ref}\n\n{pull.title}"
            self._git.merge(
                "--quiet",
                "--no-ff",
                "--no-verify",
                "--no-edit",
                "-m",
                message,
                pull.ref,
                env=_identity_env(pull.merger, GITHUB_WEB, pull.closed_at),
            )
        else:
            # GitHub's squash: the PR author authors it, the message lists the branch's commits.
            bullets = "\n\n".join(f"* {commit.message}" for commit in pull.commits)
            self._git.merge("--quiet", "--squash", pull.ref)
            self._git.commit(
                "--quiet",
                "--no-verify",
                "--cleanup=whitespace",
                "-m",
                f"{pull.title} (#{pull.number})\n\n{bullets}",
                env=_identity_env(pull.author, GITHUB_WEB, pull.closed_at),
            )
        refs = self._refs[pull.number]
        self._refs[pull.number] = PullRefs(refs.head_sha, refs.base_sha, merge_commit_sha=self._rev("main"))
        self._git.branch("-D", "--quiet", pull.ref)
