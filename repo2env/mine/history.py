"""A local clone's history for mining: its commit graph, read once, and batch reads of its objects.

Mining thousands of PRs must not cost a ``git`` process per PR: the whole graph comes from one
``git log`` and is walked in memory (:mod:`repo2env.mine.graph`: merge bases, ancestry, a PR
branch's commits), diffs and files for a batch of PRs come from one git process each
(:mod:`repo2env.mine.objects`), and so do the package's versions at their base commits
(:mod:`repo2env.mine.versions`). :class:`GitHistory` puts the three together for one clone.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import git

from repo2env.errors import SourceError
from repo2env.languages import VersionSources
from repo2env.mine.graph import CommitGraph, CommitInfo
from repo2env.mine.objects import GitObjects
from repo2env.mine.versions import describe, static_versions

__all__ = ["CommitFiles", "CommitInfo", "GitHistory"]

_FIELD = "\x1f"
_RECORD = "\x1e"


class GitHistory(CommitGraph):
    """The commit graph of a local clone (its branch's first-parent chain is the mainline) and
    batch operations over the clone's objects."""

    def __init__(self, path: Path, *, branch: str | None = None) -> None:
        self.path = Path(path)
        try:
            self.repo = git.Repo(self.path)
            if self.repo.bare or not (self.path / ".git").exists():
                # Bare mirrors without a config file confuse GitPython's work-tree detection.
                self.repo.git.update_environment(GIT_DIR=str(self.repo.git_dir))
        except git.NoSuchPathError:
            raise SourceError(f"no such path: {self.path}") from None
        except git.InvalidGitRepositoryError:
            raise SourceError(f"{self.path} is not a git repository", hint="pass a clone, a URL or owner/name") from None
        self.objects = GitObjects(self.path)
        self.branch = branch or self._default_branch()
        if branch and subprocess.run(["git", "-C", str(self.path), "rev-parse", "--verify", "--quiet", f"{branch}^{{commit}}"],
                                     capture_output=True).returncode != 0:
            raise SourceError(f"no branch {branch!r} in {self.path}", hint="git branch --list shows the branches")
        super().__init__(self._read_graph(), self.objects.git("rev-parse", self.branch).strip(),
                         merge_base_fallback=self._git_merge_base)

    def _default_branch(self) -> str:
        # Plain git, not GitPython: GitPython mistakes a bare clone without a config file (as
        # some mirrors are) for a work tree.
        heads = self.objects.git("for-each-ref", "--format=%(refname:short)", "refs/heads/").split()
        current = subprocess.run(["git", "-C", str(self.path), "symbolic-ref", "--short", "HEAD"],
                                 capture_output=True, text=True).stdout.strip()
        for candidate in (current, "main", "master"):
            if candidate and candidate in heads:
                return candidate
        if heads:
            return heads[0]
        raise SourceError(f"repository {self.path} is empty (no commits)")

    def branch_tips(self) -> dict[str, str]:
        """Local branch name -> the commit it points to."""
        tips = {}
        for line in self.objects.git("for-each-ref", "--format=%(refname:short) %(objectname)",
                                     "refs/heads/").splitlines():
            name, _, sha = line.partition(" ")
            tips[name] = sha
        return tips

    def _read_graph(self) -> dict[str, CommitInfo]:
        # Newest first (git log's committer-date order), which is the order PRs are yielded in.
        text = self.objects.git("log", "--all",
                                f"--format=%H{_FIELD}%P{_FIELD}%aI{_FIELD}%ae{_FIELD}%cI{_FIELD}%B{_RECORD}")
        commits: dict[str, CommitInfo] = {}
        for record in text.split(_RECORD):
            record = record.lstrip("\n")
            if not record:
                continue
            sha, parents, date, email, committed, message = record.split(_FIELD, 5)
            commits[sha] = CommitInfo(sha, tuple(parents.split()), date, message.strip(), email, committed)
        return commits

    def _git_merge_base(self, left: str, right: str) -> str | None:
        """``git merge-base left right``: what the in-memory walk leaves to git."""
        result = subprocess.run(["git", "-C", str(self.path), "merge-base", left, right], capture_output=True, text=True)
        return result.stdout.strip() or None

    # --- batch reads of the clone's objects ----------------------------------------------------

    def diffs(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        """``git diff base head`` for each (base, head) pair, from one git process."""
        return self.objects.diffs(pairs)

    def apply_checks(self, jobs: Sequence[tuple[str, Sequence[str]]], workers: int = 4) -> list[str | None]:
        """For each (base, patches) job: None when every patch applies on its own at base, else the
        first error (see :meth:`repo2env.mine.objects.GitObjects.apply_checks`)."""
        return self.objects.apply_checks(jobs, workers)

    def versions_at(self, commits: Sequence[str], sources: VersionSources) -> dict[str, str]:
        """The project's static version (X.Y, '' when none) at each commit, where ``sources`` (a
        language profile's) say it is written, in a few batch reads."""
        return static_versions(self.objects, commits, sources)

    def describe(self, commits: Sequence[str]) -> dict[str, str]:
        """``git describe --tags --long --always`` of each commit, '' for all when the clone has no
        tag; one ``git describe`` for the batch. A language profile reads the versions from it
        (:meth:`~repo2env.languages.LanguageProfile.scm_version`)."""
        return describe(self.objects, [commit for commit in dict.fromkeys(commits) if commit in self.commits])

    # --- files at a commit ---------------------------------------------------------------------

    def files_at(self, commit: str) -> CommitFiles:
        """The files of ``commit``, read on demand (a language profile's view of the repository)."""
        return CommitFiles(self, commit)


class CommitFiles:
    """The :class:`~repo2env.languages.RepoFiles` of one commit of a :class:`GitHistory`: a file is
    read when asked for (through GitPython's persistent ``cat-file``, not a git process per file),
    the listing on first use."""

    def __init__(self, history: GitHistory, commit: str) -> None:
        self.history = history
        self.commit = commit
        self._read: dict[str, str | None] = {}
        self._listing: list[str] | None = None

    def read(self, path: str) -> str | None:
        """The file's text at the commit, or None (missing, or a folder)."""
        if path not in self._read:
            self._read[path] = self._read_blob(path)
        return self._read[path]

    def _read_blob(self, path: str) -> str | None:
        try:
            blob = self.history.repo.commit(self.commit).tree / path
        except (KeyError, ValueError, git.BadName):
            return None
        if blob.type != "blob":  # a folder
            return None
        return blob.data_stream.read().decode("utf-8", errors="replace")

    def listing(self) -> list[str]:
        """Every file path at the commit."""
        if self._listing is None:
            self._listing = [name for name in self.history.objects.git("ls-tree", "-r", "-z", "--name-only", self.commit)
                             .split("\0") if name]
        return list(self._listing)
