"""What a patch is to the stages: its files, their hunks, and the text they render back to, byte for
byte (see :mod:`repo2env.patches`)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

DEV_NULL = "/dev/null"
SYMLINK_MODE = "120000"
SUBMODULE_MODE = "160000"
GIT_BINARY = "GIT binary patch\n"
HUNK_HEADER = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass(frozen=True, slots=True)
class Hunk:
    """One ``@@`` fragment: its header line and body lines, each as in the diff (line end included).

    ``source_length``/``target_length`` are the counts git checks the body against; ``section`` is
    what follows the closing ``@@`` (without its leading space and line end). A ``\\ No newline at
    end of file`` marker is a body line.
    """

    header: str
    source_start: int
    source_length: int
    target_start: int
    target_length: int
    lines: tuple[str, ...]

    @property
    def section(self) -> str:
        rest = self.header[HUNK_HEADER.match(self.header).end():]  # type: ignore[union-attr]
        return rest.removeprefix(" ").rstrip("\r\n")

    @property
    def added(self) -> list[str]:
        """The content of each added line, without ``+`` and without its line end."""
        return [_content(line) for line in self.lines if line.startswith("+")]

    @property
    def removed(self) -> list[str]:
        """The content of each removed line, without ``-`` and without its line end."""
        return [_content(line) for line in self.lines if line.startswith("-")]

    def render(self) -> str:
        return self.header + "".join(self.lines)

    def terminated(self) -> Hunk:
        """The same hunk with a line end after its last line (a stripped diff may lack it), so
        that another file or hunk can follow it."""
        if not self.lines or self.lines[-1].endswith("\n"):
            return self
        return replace(self, lines=(*self.lines[:-1], self.lines[-1] + "\n"))

    def alone(self, offset: int = 0) -> Hunk:
        """The hunk renumbered as if the file's earlier hunks in its patch added ``offset`` lines
        net (``0``: as the file's only hunk); an empty side is numbered by the line before it."""
        if self.source_length == 0:
            return self.moved(self.source_start + offset + 1)
        if self.target_length == 0:
            return self.moved(self.source_start + offset - 1)
        return self.moved(self.source_start + offset)

    def moved(self, target_start: int) -> Hunk:
        """The same hunk with its new side starting at ``target_start`` (``-a,b +c,d`` spelled out)."""
        section = self.header[HUNK_HEADER.match(self.header).end():]  # type: ignore[union-attr]
        header = f"@@ -{self.source_start},{self.source_length} +{target_start},{self.target_length} @@{section}"
        return replace(self, header=header, target_start=target_start)


@dataclass(frozen=True, slots=True)
class FilePatch:
    """One file of a diff, as ``git apply`` reads it.

    ``old_path`` is ``None`` for a file the patch creates, ``new_path`` ``None`` for one it
    deletes; for a rename or copy they differ, and for a modification whose ``---``/``+++`` names
    differ git also writes the new name and removes the old one. Modes are git's octal strings
    (``100644``, ``100755``, ``120000`` a symlink, ``160000`` a submodule) or ``None`` when the
    header gives none. ``binary`` holds the lines of a ``GIT binary patch`` block (its data and
    closing blank lines) or the ``Binary files ... differ`` line; ``trailer`` the lines after the
    file that git skips (blank lines, a mail signature). ``names`` is every path any line of the
    header may name, for checks that must not miss one.
    """

    header: tuple[str, ...]
    old_path: str | None
    new_path: str | None
    old_mode: str | None = None
    new_mode: str | None = None
    is_rename: bool = False
    is_copy: bool = False
    is_git: bool = True
    index: tuple[str, str] | None = None  #: the blob ids of the ``index`` line (abbreviated or full)
    hunks: tuple[Hunk, ...] = ()
    binary: tuple[str, ...] = ()
    trailer: tuple[str, ...] = ()
    names: tuple[str, ...] = field(default=())

    @property
    def path(self) -> str:
        """The path the file has after the patch (before it, for a deletion)."""
        return self.new_path if self.new_path is not None else self.old_path  # type: ignore[return-value]

    @property
    def paths(self) -> tuple[str, ...]:
        """The paths ``git apply`` writes or removes: both sides of a rename, one otherwise (a
        copy only reads its source)."""
        if self.is_copy:
            return (self.new_path,) if self.new_path is not None else ()
        return tuple(dict.fromkeys(path for path in (self.old_path, self.new_path) if path is not None))

    @property
    def is_new(self) -> bool:
        return self.old_path is None

    @property
    def is_deleted(self) -> bool:
        return self.new_path is None

    @property
    def is_binary(self) -> bool:
        return bool(self.binary)

    @property
    def is_git_binary(self) -> bool:
        """Whether the file carries binary data git applies (``GIT binary patch``)."""
        return bool(self.binary) and self.binary[0] == GIT_BINARY

    @property
    def result_mode(self) -> str | None:
        """The file's mode after the patch: the new mode, else the one it keeps."""
        return self.new_mode or self.old_mode

    @property
    def is_symlink(self) -> bool:
        """Whether the patch leaves (or writes) a symbolic link at ``new_path``."""
        return self.new_path is not None and self.result_mode == SYMLINK_MODE

    @property
    def symlink_target(self) -> str | None:
        """What the link points to after the patch, when the patch spells it out in a hunk."""
        if not self.is_symlink:
            return None
        added = [line for hunk in self.hunks for line in hunk.added]
        return added[-1] if added else None

    @property
    def added(self) -> int:
        return sum(len(hunk.added) for hunk in self.hunks)

    @property
    def removed(self) -> int:
        return sum(len(hunk.removed) for hunk in self.hunks)

    @property
    def added_lines(self) -> list[str]:
        return [line for hunk in self.hunks for line in hunk.added]

    def render(self, *, trailer: bool = True) -> str:
        """The file's text as in the diff; ``trailer=False`` leaves out the lines git skips."""
        text = "".join(self.header) + "".join(hunk.render() for hunk in self.hunks) + "".join(self.binary)
        return text + "".join(self.trailer) if trailer else text

    def with_hunks(self, hunks: Sequence[Hunk]) -> FilePatch:
        """The same file header with other hunks (and no trailer)."""
        return replace(self, hunks=tuple(hunks), trailer=())


@dataclass(frozen=True, slots=True)
class Patch:
    """A whole diff: text before the first file (a mail header), then the files in order."""

    files: tuple[FilePatch, ...]
    preamble: tuple[str, ...] = ()

    def render(self) -> str:
        return "".join(self.preamble) + "".join(file.render() for file in self.files)

    @property
    def paths(self) -> list[str]:
        """Every path the patch writes or removes, in order, once each."""
        return list(dict.fromkeys(path for file in self.files for path in file.paths))

    @property
    def added_lines(self) -> list[str]:
        """The content of every added line of every text hunk, in order."""
        return [line for file in self.files for line in file.added_lines]


def render(patch: Patch | Iterable[FilePatch]) -> str:
    """The text of a patch or of files of one (without the preamble); a file's hunks and
    trailer come out exactly as :func:`parse` read them."""
    if isinstance(patch, Patch):
        return patch.render()
    return "".join(file.render() for file in patch)


def _content(line: str) -> str:
    return line[1:-1] if line.endswith("\n") else line[1:]




def relative_symlink_target(link_path: str, target: str) -> str | None:
    """Where a symlink at ``link_path`` points, as a repository path; ``None`` when it points
    outside the repository (an absolute target, or one that climbs above the root)."""
    if target.startswith("/"):
        return None
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(link_path), target))
    if joined == ".." or joined.startswith("../"):
        return None
    return joined
