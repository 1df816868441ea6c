"""A file's text after its hunks: what ``git apply`` writes for one :class:`~repo2env.patches.FilePatch`,
computed from the text before it, for a stage that needs a patched file without a work tree (the
build reads the package.json a PR leaves)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from repo2env.errors import PatchError
from repo2env.patches.model import FilePatch, Hunk, Patch


def patched_text(read: Callable[[str], str | None], path: str, patches: Sequence[Patch]) -> str | None:
    """The text of ``path`` after every patch in turn, ``read`` giving a file's text before them
    (None: absent, or deleted by one). Raises :class:`~repo2env.errors.PatchError` as
    :func:`apply_to_text` does."""
    text = read(path)
    for patch in patches:
        for file in patch.files:
            if path not in file.paths:
                continue
            source = text if file.old_path in (path, None) else read(file.old_path)
            text = apply_to_text(file, source) if file.new_path == path else None
    return text


def apply_to_text(file: FilePatch, text: str | None) -> str | None:
    """The text of ``file.path`` after the patch, given ``text``, the file's text before it (None:
    the file does not exist). None when the patch deletes the file. Each hunk applies where its
    context and removed lines match, at the line it names or, as ``git apply`` allows, the nearest
    line after the previous hunk where they do (no fuzz: every context line must match). Raises
    :class:`~repo2env.errors.PatchError` when a hunk fits nowhere or the change is binary."""
    if file.is_binary:
        raise PatchError(f"{file.path}: a binary change has no text to apply")
    if file.is_deleted:
        return None
    lines = _split_lines(text or "")
    result: list[str] = []
    position = 0  # lines before this index are placed already
    offset = 0  # how far the file has moved from where the hunks' headers put their lines
    for hunk in file.hunks:
        before, after = _sides(hunk)
        # An empty old side (``-N,0``) inserts after line N: index N; otherwise line N is index N - 1.
        named = hunk.source_start if not before else hunk.source_start - 1
        found = _find(lines, before, named + offset, position)
        if found is None:
            raise PatchError(f"{file.path}: the hunk {hunk.header.strip()} does not apply")
        offset = found - named
        result += lines[position:found] + after
        position = found + len(before)
    return "".join(result + lines[position:])


def _split_lines(text: str) -> list[str]:
    pieces = text.split("\n")
    return [piece + "\n" for piece in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])


def _sides(hunk: Hunk) -> tuple[list[str], list[str]]:
    """The hunk's old and new lines, each with its line end (none where ``\\ No newline`` says so)."""
    before: list[str] = []
    after: list[str] = []
    last: tuple[list[str], ...] = ()
    for line in hunk.lines:
        if line.startswith("\\"):
            for side in last:
                side[-1] = side[-1].removesuffix("\n")
            continue
        if line in ("\n", "\r\n"):  # an empty context line whose leading space was stripped
            content, kind = line, " "
        else:
            content, kind = line[1:], line[0]
        if not content.endswith("\n"):
            content += "\n"  # a diff cut after its last line; a marker would say the file ends so
        last = {" ": (before, after), "-": (before,), "+": (after,)}.get(kind, ())
        for side in last:
            side.append(content)
    return before, after


def _find(lines: Sequence[str], wanted: Sequence[str], near: int, start: int) -> int | None:
    """The index at or after ``start`` nearest to ``near`` where ``wanted`` is the text of ``lines``."""
    last = len(lines) - len(wanted)
    if last < start:
        return None
    near = min(max(near, start), last)
    for distance in range(max(near - start, last - near) + 1):
        for index in (near - distance, near + distance):
            if start <= index <= last and list(lines[index:index + len(wanted)]) == list(wanted):
                return index
    return None
