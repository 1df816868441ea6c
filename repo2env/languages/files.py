"""A repository's files at one commit, as every profile reads them: the :class:`RepoFiles` protocol.

Profiles read configuration (``pyproject.toml``, ``package.json``, lock files ...) through it and
never touch git or the disk themselves: mining gives them the files of a base commit read from the
clone's object store, the build the files of the snapshot, tests a :class:`DictRepoFiles`.
"""

from __future__ import annotations

from typing import Protocol


class RepoFiles(Protocol):
    """The files of a repository at one commit."""

    def read(self, path: str) -> str | None:
        """The text of the file at ``path`` (POSIX, relative), or None if it is absent or binary."""
        ...

    def listing(self) -> list[str]:
        """Every file path at the commit (POSIX, relative to the repository root)."""
        ...


class DictRepoFiles(dict[str, str]):
    """A :class:`RepoFiles` held in memory: path -> text. For tests and small callers."""

    def read(self, path: str) -> str | None:
        """The text at ``path``, or None."""
        return self.get(path)

    def listing(self) -> list[str]:
        """All paths, sorted."""
        return sorted(self)
