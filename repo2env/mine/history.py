"""A repository's commit graph, read once, and the batch git operations mining needs.

Mining thousands of PRs must not cost a ``git`` process per PR: the whole graph comes from one
``git log``, merge bases are found by walking it in memory, diffs for a batch of PRs come from one
``git diff-tree --stdin`` and whether their patches apply from one ``git cat-file --batch-check``
of the blobs they change. git runs per PR only where that is not conclusive: a merge base with
several candidates (``git merge-base``), a patch the blob ids cannot settle (``git apply --check``,
in a small thread pool).
"""

from __future__ import annotations

import heapq
import os
import re
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import git

from repo2env.errors import PatchError, SourceError
from repo2env.languages import VersionSources
from repo2env.patches import parse

_FIELD = "\x1f"
_RECORD = "\x1e"


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


class GitHistory:
    """The commit graph of a local clone and batch operations over it."""

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
        self.branch = branch or self._default_branch()
        if branch and subprocess.run(["git", "-C", str(self.path), "rev-parse", "--verify", "--quiet", f"{branch}^{{commit}}"],
                                     capture_output=True).returncode != 0:
            raise SourceError(f"no branch {branch!r} in {self.path}", hint="git branch --list shows the branches")
        self.commits = self._read_graph()
        self.mainline = self._first_parent_chain(self.branch)
        self._mainline_index = {sha: index for index, sha in enumerate(self.mainline)}
        self._landed: dict[str, int] | None = None
        self._generations: dict[str, int] | None = None
        self._reachable: set[str] | None = None
        self._tagged: bool | None = None

    # --- graph ---------------------------------------------------------------------------------

    def _git(self, *args: str, input_text: str | None = None) -> str:
        result = subprocess.run(
            ["git", "-C", str(self.path), *args], input=input_text, capture_output=True, text=True,
            encoding="utf-8", errors="replace",
        )
        if result.returncode != 0:
            raise SourceError(f"git {args[0]} failed in {self.path}: {result.stderr.strip()[:300]}")
        return result.stdout

    def _default_branch(self) -> str:
        # Plain git, not GitPython: GitPython mistakes a bare clone without a config file (as
        # some mirrors are) for a work tree.
        heads = self._git("for-each-ref", "--format=%(refname:short)", "refs/heads/").split()
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
        for line in self._git("for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads/").splitlines():
            name, _, sha = line.partition(" ")
            tips[name] = sha
        return tips

    def _read_graph(self) -> dict[str, CommitInfo]:
        # Newest first (git log's committer-date order), which is the order PRs are yielded in.
        text = self._git("log", "--all", f"--format=%H{_FIELD}%P{_FIELD}%aI{_FIELD}%ae{_FIELD}%cI{_FIELD}%B{_RECORD}")
        commits: dict[str, CommitInfo] = {}
        for record in text.split(_RECORD):
            record = record.lstrip("\n")
            if not record:
                continue
            sha, parents, date, email, committed, message = record.split(_FIELD, 5)
            commits[sha] = CommitInfo(sha, tuple(parents.split()), date, message.strip(), email, committed)
        return commits

    def _first_parent_chain(self, branch: str) -> list[str]:
        head = self._git("rev-parse", branch).strip()
        chain = []
        sha: str | None = head
        while sha is not None:
            chain.append(sha)
            parents = self.commits[sha].parents
            sha = parents[0] if parents else None
        chain.reverse()  # oldest first
        return chain

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
        result = subprocess.run(["git", "-C", str(self.path), "merge-base", left, right], capture_output=True, text=True)
        return result.stdout.strip() or None

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

    # --- batch diffs ---------------------------------------------------------------------------

    def diffs(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        """``git diff base head`` for each (base, head) pair, from one git process."""
        if not pairs:
            return []
        # diff-tree --stdin reads "<commit> <parent>" lines and diffs parent -> commit. With
        # --always it echoes each commit id before its (possibly empty) diff, in input order,
        # which is how the output is split back per pair.
        lines = [f"{head} {base}" for base, head in pairs]
        output = self._git("diff-tree", "--stdin", "--always", "-p", "--full-index", "--no-renames",
                           input_text="\n".join(lines) + "\n")
        results: list[list[str]] = []
        expected = iter(head for _, head in pairs)
        next_head = next(expected, None)
        for line in output.splitlines(keepends=True):
            if next_head is not None and line.rstrip("\n") == next_head:
                results.append([])
                next_head = next(expected, None)
            elif results:
                results[-1].append(line)
        if len(results) != len(pairs):
            raise SourceError(f"git diff-tree returned {len(results)} diffs for {len(pairs)} PRs in {self.path}")
        return ["".join(chunk) for chunk in results]

    # --- applying ------------------------------------------------------------------------------

    def apply_check(self, base: str, patches: Iterable[str]) -> str | None:
        """None when every patch applies on its own at ``base`` (``git apply --check``), else the
        first error."""
        with tempfile.TemporaryDirectory(prefix="repo2env-apply-") as scratch:
            env = {**os.environ, "GIT_INDEX_FILE": str(Path(scratch) / "index")}
            read = subprocess.run(["git", "-C", str(self.path), "read-tree", base], env=env, capture_output=True, text=True)
            if read.returncode != 0:
                return f"cannot read {base[:12]}: {read.stderr.strip()[:200]}"
            for patch in patches:
                if not patch:
                    continue
                check = subprocess.run(
                    ["git", "-C", str(self.path), "apply", "--cached", "--check", "-"], input=patch, env=env,
                    capture_output=True, text=True,
                )
                if check.returncode != 0:
                    return check.stderr.strip().splitlines()[0] if check.stderr.strip() else "git apply --check failed"
        return None

    def apply_checks(self, jobs: Sequence[tuple[str, Sequence[str]]], workers: int = 4) -> list[str | None]:
        """:meth:`apply_check` for many (base, patches) jobs, cheaply.

        A patch written by git with ``--full-index`` names the exact blob each file had before; when
        every such blob is the one at ``base`` (new files: absent there), ``git apply --check`` can
        only succeed, so one ``git cat-file --batch-check`` for the whole batch settles it. Jobs
        where that cannot be shown (mode-only changes, quoted paths, another blob) run the real
        ``git apply --check``, in a thread pool, and report its error.
        """
        preimages = [[_preimages(patch) for patch in patches if patch] for _, patches in jobs]
        queries = sorted({f"{base}:{path}" for (base, _), files_per_patch in zip(jobs, preimages, strict=True)
                          for files in files_per_patch if files is not None for path, _ in files})
        found = self._blob_ids(queries)
        uncertain = []
        for index, ((base, _), files_per_patch) in enumerate(zip(jobs, preimages, strict=True)):
            proven = all(
                files is not None and all(
                    found.get(f"{base}:{path}") == (None if set(old) == {"0"} else old) for path, old in files)
                for files in files_per_patch
            )
            if not proven:
                uncertain.append(index)
        results: list[str | None] = [None] * len(jobs)
        if uncertain:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                for index, error in zip(uncertain, pool.map(lambda i: self.apply_check(*jobs[i]), uncertain), strict=True):
                    results[index] = error
        return results

    def _blob_ids(self, queries: Sequence[str]) -> dict[str, str | None]:
        """``rev:path`` -> blob id (None when missing), from one ``git cat-file --batch-check``."""
        found = self._cat_file(queries, contents=False)
        return {query: found[query][0] if query in found and found[query][1] == "blob" else None for query in queries}

    # --- files at a commit ---------------------------------------------------------------------

    def files_at(self, commit: str) -> CommitFiles:
        """The files of ``commit``, read on demand (a language profile's view of the repository)."""
        return CommitFiles(self, commit)

    def read_file(self, commit: str, path: str) -> str | None:
        """A file's text at ``commit`` (through GitPython's persistent cat-file), or None."""
        try:
            blob = self.repo.commit(commit).tree / path
        except (KeyError, ValueError, git.BadName):
            return None
        if blob.type != "blob":  # a folder
            return None
        return blob.data_stream.read().decode("utf-8", errors="replace")

    def versions_at(self, commits: Sequence[str], sources: VersionSources) -> dict[str, str]:
        """The project's X.Y version at each commit as ``sources`` (a language profile's) say where
        it is written: the root files of all commits come from one ``git cat-file --batch``; only
        commits whose version lives elsewhere search their package folders; '' when none says."""
        unique = list(dict.fromkeys(commits))
        queries = [f"{commit}:{name}" for commit in unique for name in sources.files]
        contents = self._blobs(queries)
        versions = {}
        for commit in unique:
            for name in sources.files:
                text = contents.get(f"{commit}:{name}")
                version = sources.parse(name, text) if text else None
                if version:
                    versions[commit] = major_minor(version)
                    break
        rest = [commit for commit in unique if commit not in versions]
        versions.update(self._package_versions(rest, sources))
        return versions

    def _package_versions(self, commits: Sequence[str], sources: VersionSources) -> dict[str, str]:
        """:meth:`versions_at`'s search of the package folders, for many commits in four
        ``git cat-file --batch`` processes (root trees, their folders, ``src/``'s folders, files)."""
        if not commits:
            return {}
        if not sources.package_files:
            return dict.fromkeys(commits, "")
        roots = self._objects([f"{commit}^{{tree}}" for commit in commits], "tree")
        folders: dict[str, list[str]] = {}
        for commit in commits:
            names = [name for name, is_tree in _tree_entries(roots.get(f"{commit}^{{tree}}", b"")) if is_tree]
            folders[commit] = [name for name in names if not name.startswith((".", "test", "doc"))]
        listed = self._objects([f"{commit}:{folder}" for commit in commits for folder in folders[commit]], "tree")
        for commit in commits:
            if "src" in folders[commit]:  # a src layout: its packages are one level down
                src = listed.get(f"{commit}:src", b"")
                inner = [f"src/{name}" for name, is_tree in _tree_entries(src) if is_tree]
                folders[commit] += inner
        listed.update(self._objects([f"{commit}:{folder}" for commit in commits for folder in folders[commit]
                                     if f"{commit}:{folder}" not in listed], "tree"))
        candidates = {
            commit: [f"{folder}/{name}" for folder in folders[commit]
                     for name, is_tree in _tree_entries(listed.get(f"{commit}:{folder}", b""))
                     if not is_tree and name in sources.package_files]
            for commit in commits
        }
        texts = self._blobs([f"{commit}:{path}" for commit in commits for path in candidates[commit]])
        versions = {}
        for commit in commits:
            for path in candidates[commit]:
                version = sources.parse(path, texts.get(f"{commit}:{path}", ""))
                if version:
                    versions[commit] = major_minor(version)
                    break
            else:
                versions[commit] = ""
        return versions

    def _blobs(self, queries: Sequence[str]) -> dict[str, str]:
        """``rev:path`` -> text for the ones that exist, from one ``git cat-file --batch``."""
        return {query: data.decode("utf-8", errors="replace") for query, data in self._objects(queries, "blob").items()}

    def _objects(self, queries: Sequence[str], kind: str) -> dict[str, bytes]:
        """``rev:path`` -> raw content for the ones that exist and are a ``kind`` (blob, tree), from
        one ``git cat-file --batch``."""
        return {query: data for query, (_, found_kind, data) in self._cat_file(queries, contents=True).items()
                if found_kind == kind}

    def _cat_file(self, queries: Sequence[str], *, contents: bool) -> dict[str, tuple[str, str, bytes]]:
        """``rev:path`` -> (object id, type, content) for the ones that exist, from one ``git
        cat-file --batch`` (``--batch-check`` and empty contents when ``contents`` is false)."""
        if not queries:
            return {}
        result = subprocess.run(["git", "-C", str(self.path), "cat-file", "--batch" if contents else "--batch-check"],
                                input=("\n".join(queries) + "\n").encode(), capture_output=True)
        output, position, found = result.stdout, 0, {}
        for query in queries:
            end = output.index(b"\n", position)
            header = output[position:end].split()
            position = end + 1
            if len(header) == 3 and header[1] in (b"blob", b"tree", b"commit", b"tag"):
                size = int(header[2]) if contents else 0
                found[query] = (header[0].decode(), header[1].decode(), output[position:position + size])
                if contents:  # the content and its newline follow the header
                    position += size + 1
        return found

    def describe(self, commits: Sequence[str]) -> dict[str, str]:
        """``git describe --tags --long --always`` of each commit (the whole history's nearest
        version tag, as setuptools-scm asks for it), '' for all when the clone has no tag; one
        ``git describe`` process for the whole batch. A language profile reads the versions from
        it (:meth:`~repo2env.languages.LanguageProfile.scm_version`)."""
        unique = [commit for commit in dict.fromkeys(commits) if commit in self.commits]
        if not unique or not self._has_tags():
            return dict.fromkeys(unique, "")
        # setuptools-scm's own command (--dirty aside); --always keeps one untagged commit from
        # failing the whole batch (it prints a bare abbreviated SHA instead).
        output = self._git("describe", "--tags", "--long", "--always", "--match", "*[0-9]*", *unique).split()
        if len(output) != len(unique):
            raise SourceError(f"git describe returned {len(output)} answers for {len(unique)} commits in {self.path}")
        return dict(zip(unique, output, strict=True))

    def _has_tags(self) -> bool:
        if self._tagged is None:
            self._tagged = bool(self._git("for-each-ref", "--count=1", "--format=%(refname)", "refs/tags/").strip())
        return self._tagged


class CommitFiles:
    """The :class:`~repo2env.languages.RepoFiles` of one commit of a :class:`GitHistory`: a file is
    read when asked for (through GitPython's persistent ``cat-file``), the listing on first use."""

    def __init__(self, history: GitHistory, commit: str) -> None:
        self.history = history
        self.commit = commit
        self._read: dict[str, str | None] = {}
        self._listing: list[str] | None = None

    def read(self, path: str) -> str | None:
        """The file's text at the commit, or None."""
        if path not in self._read:
            self._read[path] = self.history.read_file(self.commit, path)
        return self._read[path]

    def listing(self) -> list[str]:
        """Every file path at the commit."""
        if self._listing is None:
            self._listing = [name for name in self.history._git("ls-tree", "-r", "-z", "--name-only", self.commit)
                             .split("\0") if name]
        return list(self._listing)


def _preimages(patch: str) -> list[tuple[str, str]] | None:
    """(path, blob id before) for each file of a full-index git patch; None when a file lacks one
    (no full ``index`` line, a rename or copy, a traditional diff, or a patch that does not parse)."""
    try:
        files = parse(patch).files
    except PatchError:
        return None
    preimages = []
    for file in files:
        if (not file.is_git or file.is_rename or file.is_copy or file.index is None
                or None not in (file.old_path, file.new_path) and file.old_path != file.new_path
                or not _FULL_ID.fullmatch(file.index[0])):
            return None
        preimages.append((file.path, file.index[0]))
    return preimages


_FULL_ID = re.compile(r"[0-9a-f]{40}")


def _tree_entries(raw: bytes) -> list[tuple[str, bool]]:
    """(name, is a folder) for each entry of a raw git tree object (``<mode> <name>\\0<20-byte id>``)."""
    entries, position = [], 0
    while position < len(raw):
        space = raw.index(b" ", position)
        nul = raw.index(b"\0", space)
        entries.append((raw[space + 1:nul].decode("utf-8", errors="replace"), raw[position:space] == b"40000"))
        position = nul + 21
    return entries


def major_minor(version: str) -> str:
    """``1.2.4.dev5+gabc`` -> ``1.2``: how SWE-bench groups tasks by version."""
    match = re.match(r"(\d+)\.(\d+)", version)
    return f"{match.group(1)}.{match.group(2)}" if match else version
