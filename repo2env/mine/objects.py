"""A repository's objects read in batches: one git process for many blobs, trees, diffs or
``git apply --check`` proofs.

``git diff-tree --stdin`` gives the diffs of a whole batch of PRs, ``git cat-file --batch`` the
files of many commits, and whether a batch of patches applies is proved from the blob ids a
``--full-index`` diff names (one ``git cat-file --batch-check``); ``git apply --check`` runs per
patch only where that proof cannot be made, in a small thread pool.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from repo2env.errors import PatchError, SourceError
from repo2env.patches import parse


class GitObjects:
    """Batch reads of the objects of the repository at ``path`` (a clone, bare or not)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._tagged: bool | None = None

    def git(self, *args: str, input_text: str | None = None) -> str:
        """``git ARGS`` in the repository: its output, or a SourceError with git's own message."""
        result = subprocess.run(
            ["git", "-C", str(self.path), *args], input=input_text, capture_output=True, text=True,
            encoding="utf-8", errors="replace",
        )
        if result.returncode != 0:
            raise SourceError(f"git {args[0]} failed in {self.path}: {result.stderr.strip()[:300]}")
        return result.stdout

    def has_tags(self) -> bool:
        """Whether the repository has any tag (asked once)."""
        if self._tagged is None:
            self._tagged = bool(self.git("for-each-ref", "--count=1", "--format=%(refname)", "refs/tags/").strip())
        return self._tagged

    def diffs(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        """``git diff base head`` for each (base, head) pair, from one git process."""
        if not pairs:
            return []
        # diff-tree --stdin reads "<commit> <parent>" lines and diffs parent -> commit. With
        # --always it echoes each commit id before its (possibly empty) diff, in input order,
        # which is how the output is split back per pair.
        lines = [f"{head} {base}" for base, head in pairs]
        output = self.git("diff-tree", "--stdin", "--always", "-p", "--full-index", "--no-renames",
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
        found = self.blob_ids(queries)
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

    def blob_ids(self, queries: Sequence[str]) -> dict[str, str | None]:
        """``rev:path`` -> blob id (None when missing), from one ``git cat-file --batch-check``."""
        found = self.cat_file(queries, contents=False)
        return {query: found[query][0] if query in found and found[query][1] == "blob" else None for query in queries}


    def blobs(self, queries: Sequence[str]) -> dict[str, str]:
        """``rev:path`` -> text for the ones that exist, from one ``git cat-file --batch``."""
        return {query: data.decode("utf-8", errors="replace") for query, data in self.objects(queries, "blob").items()}

    def objects(self, queries: Sequence[str], kind: str) -> dict[str, bytes]:
        """``rev:path`` -> raw content for the ones that exist and are a ``kind`` (blob, tree), from
        one ``git cat-file --batch``."""
        return {query: data for query, (_, found_kind, data) in self.cat_file(queries, contents=True).items()
                if found_kind == kind}

    def cat_file(self, queries: Sequence[str], *, contents: bool) -> dict[str, tuple[str, str, bytes]]:
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
