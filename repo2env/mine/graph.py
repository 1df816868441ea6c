"""A repository's commit graph in memory, and the walks mining needs over it.

Mining thousands of PRs must not cost a ``git`` process per PR: the graph is read once (by
:class:`repo2env.mine.history.GitHistory`, from one ``git log``) and merge bases, ancestry and a
PR branch's commits are found by walking it here, in memory, as git's own "paint down" walk does
over generation numbers. Only a merge base this walk cannot settle (several candidates) is asked of
git, through the ``merge_base_fallback`` the graph is given.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CommitInfo:
    """One commit of the graph."""

    sha: str
    parents: tuple[str, ...]
    author_date: str
    message: str
    author_email: str = ""
    commit_date: str = ""

    @property
    def subject(self) -> str:
        return self.message.split("\n", 1)[0]


class CommitGraph:
    """The commits of a repository (sha -> :class:`CommitInfo`, newest first) and its mainline:
    the first-parent chain of one tip, oldest first."""

    def __init__(self, commits: dict[str, CommitInfo], tip: str, *,
                 merge_base_fallback: Callable[[str, str], str | None]) -> None:
        self.commits = commits
        self.mainline = first_parent_chain(commits, tip)
        self._mainline_index = {sha: index for index, sha in enumerate(self.mainline)}
        self._merge_base_fallback = merge_base_fallback
        self._landed: dict[str, int] | None = None
        self._generations: dict[str, int] | None = None
        self._reachable: set[str] | None = None

    def _landing_index(self) -> dict[str, int]:
        # landed[c] = index of the first mainline commit that has c as an ancestor, i.e. when c
        # "landed" on the branch. Each commit is visited once, so this is linear in the graph.
        landed: dict[str, int] = {}
        for index, sha in enumerate(self.mainline):
            landed[sha] = index
            stack = list(self.commits[sha].parents[1:])
            while stack:
                current = stack.pop()
                if current in landed or current not in self.commits:
                    continue
                landed[current] = index
                stack.extend(self.commits[current].parents)
        return landed

    def landed_by(self, sha: str) -> str | None:
        """The first mainline commit that has ``sha`` as an ancestor (itself, when it is on the
        mainline): the commit that brought it to the branch; None when the branch never got it."""
        if self._landed is None:
            self._landed = self._landing_index()
        index = self._landed.get(sha)
        return None if index is None else self.mainline[index]

    def on_mainline(self, sha: str) -> bool:
        """Whether ``sha`` is on the branch's first-parent chain."""
        return sha in self._mainline_index

    def merge_base(self, left: str, right: str) -> str | None:
        """``git merge-base left right``, found in memory when ``left`` is on the mainline.

        Walks back from ``right`` and stops at commits that had landed on the mainline by
        ``left``: those are common ancestors. One such stop (or only mainline stops, whose newest
        is the answer) settles it; anything less clear asks git.
        """
        left_index = self._mainline_index.get(left)
        if left_index is None:
            return self._merge_base_anywhere(left, right)
        if self._landed is None:
            self._landed = self._landing_index()
        stops: set[str] = set()
        frontier, seen = [right], set()
        while frontier:
            sha = frontier.pop()
            if sha in seen:
                continue
            seen.add(sha)
            if self._landed.get(sha, left_index + 1) <= left_index:
                stops.add(sha)
                continue
            commit = self.commits.get(sha)
            if commit is None:
                return self._merge_base_anywhere(left, right)
            frontier.extend(commit.parents)
        if len(stops) == 1:
            return next(iter(stops))
        if stops and all(sha in self._mainline_index for sha in stops):
            return max(stops, key=self._mainline_index.__getitem__)
        return self._merge_base_anywhere(left, right)

    def _merge_base_anywhere(self, left: str, right: str) -> str | None:
        if left in self.commits and right in self.commits:
            # git's own "paint down to common" walk, in memory: newest generation first, so a
            # commit is judged only after every descendant of it in either history was.
            bases = self._common_ancestors(left, right)
            if len(bases) == 1:
                return bases[0]
        return self._merge_base_fallback(left, right)

    def _common_ancestors(self, left: str, right: str) -> list[str]:
        """The candidates ``git merge-base --all`` starts from (redundant ones not removed)."""
        left_flag, right_flag, stale = 1, 2, 4
        flags = {left: left_flag}
        flags[right] = flags.get(right, 0) | right_flag
        found = []
        for sha, current in self._paint_down(flags, until=stale):
            if current & (left_flag | right_flag) == left_flag | right_flag and not current & stale:
                found.append(sha)
                flags[sha] = current | stale
        return found

    def _paint_down(self, flags: dict[str, int], *, until: int) -> Iterator[tuple[str, int]]:
        """git's "paint down" walk: from the commits in ``flags``, newest generation first, each
        commit's flags are OR-ed into its parents'; a commit is yielded (with its flags) only after
        every descendant of it in the walk was. The caller may add flags to ``flags[sha]`` before
        asking for the next commit: they flow on to the parents. The walk ends when every commit
        left to visit has the ``until`` flag."""
        generations = self.generations()
        queue = [(-generations[sha], sha) for sha in flags]
        heapq.heapify(queue)
        # The frontier stays small (a few branch tips), so scanning it each step is cheap.
        while queue and any(not flags[sha] & until for _, sha in queue):
            _, sha = heapq.heappop(queue)
            yield sha, flags[sha]
            current = flags[sha]
            for parent in self.commits[sha].parents:
                if parent not in self.commits:
                    continue
                before = flags.get(parent, 0)
                if before & current == current:
                    continue
                flags[parent] = before | current
                heapq.heappush(queue, (-generations[parent], parent))

    def generations(self) -> dict[str, int]:
        """Each commit's generation number: 1 for a root, else one more than its highest parent."""
        if self._generations is None:
            generations: dict[str, int] = {}
            for start in self.commits:
                if start in generations:
                    continue
                stack = [start]
                while stack:
                    sha = stack[-1]
                    if sha in generations:
                        stack.pop()
                        continue
                    parents = [parent for parent in self.commits[sha].parents if parent in self.commits]
                    pending = [parent for parent in parents if parent not in generations]
                    if pending:
                        stack.extend(pending)
                        continue
                    generations[sha] = 1 + max((generations[parent] for parent in parents), default=0)
                    stack.pop()
            self._generations = generations
        return self._generations

    def reachable(self) -> set[str]:
        """Every commit reachable from the branch (its whole history, not only the first parents)."""
        if self._reachable is None:
            self._reachable = self.reachable_from([self.mainline[-1]])
        return self._reachable

    def reachable_from(self, tips: Iterable[str], *, excluding: set[str] | frozenset[str] = frozenset()) -> set[str]:
        """Commits reachable from ``tips``, not walking into ``excluding``."""
        found: set[str] = set()
        stack = [tip for tip in tips if tip in self.commits]
        while stack:
            sha = stack.pop()
            if sha in found or sha in excluding:
                continue
            found.add(sha)
            stack.extend(parent for parent in self.commits[sha].parents if parent in self.commits)
        return found

    def is_ancestor(self, older: str, newer: str) -> bool:
        """``git merge-base --is-ancestor older newer``, in memory (generation numbers bound the walk)."""
        if older not in self.commits or newer not in self.commits:
            return False
        generations = self.generations()
        floor = generations[older]
        stack, seen = [newer], set()
        while stack:
            sha = stack.pop()
            if sha == older:
                return True
            if sha in seen or generations[sha] <= floor:
                continue
            seen.add(sha)
            stack.extend(parent for parent in self.commits[sha].parents if parent in self.commits)
        return False

    def commits_between(self, base: str, head: str) -> list[CommitInfo]:
        """Commits reachable from ``head`` but not from ``base`` (a PR branch's commits), oldest first."""
        base_index = self._mainline_index.get(base)
        if base_index is None and base in self.commits:
            return self._commits_between_anywhere(base, head)
        if base_index is not None and self._landed is None:
            self._landed = self._landing_index()
        result, frontier, seen = [], [head], set()
        while frontier:
            sha = frontier.pop()
            if sha in seen or sha == base:
                continue
            seen.add(sha)
            if base_index is not None and self._landed.get(sha, base_index + 1) <= base_index:
                continue
            commit = self.commits.get(sha)
            if commit is None:
                continue
            result.append(commit)
            frontier.extend(commit.parents)
        return sorted(result, key=lambda commit: commit.author_date)

    def _commits_between_anywhere(self, base: str, head: str) -> list[CommitInfo]:
        # ``git rev-list base..head`` in memory: newest generation first, so every commit is
        # known to be reachable from ``base`` (or not) before it is judged.
        if head not in self.commits:
            return []
        wanted, excluded = 1, 2
        flags = {head: wanted}
        flags[base] = flags.get(base, 0) | excluded
        result = [self.commits[sha] for sha, current in self._paint_down(flags, until=excluded)
                  if not current & excluded]
        return sorted(result, key=lambda commit: commit.author_date)


def first_parent_chain(commits: dict[str, CommitInfo], tip: str) -> list[str]:
    """The first-parent chain from ``tip`` back to a root, oldest first."""
    chain = []
    sha: str | None = tip
    while sha is not None:
        chain.append(sha)
        parents = commits[sha].parents
        sha = parents[0] if parents else None
    chain.reverse()
    return chain
