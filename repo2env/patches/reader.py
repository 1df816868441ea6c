"""Reading a diff as ``git apply`` does: git's ``apply.c`` (``find_header``, ``parse_git_diff_header``,
``parse_fragment``, ``parse_binary``) rule for rule, into :mod:`repo2env.patches.model` objects; a
diff git would refuse raises :class:`~repo2env.errors.PatchError` here too."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from repo2env.errors import PatchError
from repo2env.patches.model import GIT_BINARY, HUNK_HEADER, FilePatch, Hunk, Patch
from repo2env.patches.names import (
    candidates,
    diff_git_names,
    find_name,
    find_name_traditional,
    git_header_name,
    guess_p_value,
    is_dev_null,
)

_DIFF_GIT = "diff --git "


def parse(text: str) -> Patch:
    """Read a diff as ``git apply`` does. Raises :class:`PatchError` where git would refuse it:
    a hunk outside any file, a hunk whose line counts do not match its body, a corrupt binary
    block, a header that contradicts itself or names no file, a file section with nothing in it."""
    return _Parser(_split_lines(text)).run()


def parse_readable(texts: Iterable[str]) -> list[Patch]:
    """The patches of ``texts`` that parse, in order; one that does not is left out."""
    parsed = []
    for text in texts:
        try:
            parsed.append(parse(text))
        except PatchError:
            continue
    return parsed


def hunk_count(text: str) -> int:
    return sum(len(file.hunks) for file in parse(text).files)


def _split_lines(text: str) -> list[str]:
    """``text`` cut after each ``\\n`` and nowhere else (``\\r``, form feeds stay in their line)."""
    pieces = text.split("\n")
    lines = [piece + "\n" for piece in pieces[:-1]]
    if pieces[-1]:
        lines.append(pieces[-1])
    return lines


def _fail(number: int, message: str) -> PatchError:
    return PatchError(f"cannot parse the diff at line {number}: {message}",
                      hint="expected a git-format diff such as `git diff` prints")


@dataclass
class _Header:
    """What a file header says so far (git's ``struct patch`` while its header is read)."""

    def_name: str | None = None
    old_name: str | None = None
    new_name: str | None = None
    old_mode: str | None = None
    new_mode: str | None = None
    is_new: bool = False
    is_delete: bool = False
    is_rename: bool = False
    is_copy: bool = False
    index: tuple[str, str] | None = None
    names: list[str] = field(default_factory=list)


class _Parser:
    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        # rest[i]: characters from line i to the end (git checks how much input is left).
        self.rest = [0] * (len(lines) + 1)
        for index in range(len(lines) - 1, -1, -1):
            self.rest[index] = self.rest[index + 1] + len(lines[index])
        # git guesses -p0 once, from the first traditional file whose names have no folder, and
        # keeps it for every file after (git files included).
        self.p_value, self.p_known = 1, False

    def run(self) -> Patch:
        files: list[FilePatch] = []
        preamble: list[str] = []
        index = 0
        while index < len(self.lines):
            found = self._find_header(index)
            if found is None:
                skipped = self.lines[index:]
                index = len(self.lines)
            else:
                start, end, header = found
                skipped = self.lines[index:start]
            if files:
                files[-1] = replace(files[-1], trailer=files[-1].trailer + tuple(skipped))
            else:
                preamble.extend(skipped)
            if found is None:
                break
            file, index = self._file(start, end, header)
            files.append(file)
        return Patch(tuple(files), tuple(preamble))

    # git's find_header: the next line that starts a file, skipping garbage.
    def _find_header(self, index: int) -> tuple[int, int, _Header] | None:
        lines = self.lines
        while index < len(lines):
            line = lines[index]
            if len(line) < 6:
                index += 1
                continue
            if line.startswith("@@ -") and _fragment_header(line) is not None:
                raise _fail(index + 1, "a hunk outside any file (patch fragment without header)")
            if self.rest[index + 1] < 6:
                break
            if line.startswith(_DIFF_GIT):
                header, end = self._git_header(index)
                if end > index + 1:
                    return index, end, header
                index += 1
                continue
            if (line.startswith("--- ") and lines[index + 1].startswith("+++ ") and index + 2 < len(lines)
                    and lines[index + 2].startswith("@@ -")):
                return index, index + 2, self._traditional_header(index)
            index += 1
        return None

    def _git_header(self, index: int) -> tuple[_Header, int]:
        lines = self.lines
        first = lines[index]
        header = _Header(def_name=git_header_name(self.p_value, first[len(_DIFF_GIT):].rstrip("\n")))
        header.names.extend(diff_git_names(first[len(_DIFF_GIT):].rstrip("\n")))
        end = index + 1
        while end < len(lines):
            line = lines[end]
            if not line.endswith("\n") or line.startswith("@@ -"):
                break
            if not self._header_line(header, line, end + 1):
                break
            end += 1
        if end == index + 1:
            return header, end
        if header.old_name is None and header.new_name is None:
            if header.def_name is None:
                raise _fail(index + 1, "the git header names no file (its a/ and b/ names differ and no "
                                       "other line names one)")
            header.old_name = header.new_name = header.def_name
        if (header.new_name is None and not header.is_delete) or (header.old_name is None and not header.is_new):
            raise _fail(index + 1, "the git header lacks a file name")
        return header, end

    def _header_line(self, header: _Header, line: str, number: int) -> bool:
        """Apply one git extended header line; ``False`` ends the header (git's ``gitdiff_*``)."""
        value = line[:-1]
        if line.startswith("--- "):
            header.old_name = self._verify_name(header, value[4:], header.is_new, header.old_name, number, "old")
        elif line.startswith("+++ "):
            header.new_name = self._verify_name(header, value[4:], header.is_delete, header.new_name, number, "new")
        elif line.startswith("old mode "):
            header.old_mode = _mode(value[9:], number)
        elif line.startswith("new mode "):
            header.new_mode = _mode(value[9:], number)
        elif line.startswith("deleted file mode "):
            header.is_delete, header.old_name = True, header.def_name
            header.old_mode = _mode(value[18:], number)
        elif line.startswith("new file mode "):
            header.is_new, header.new_name = True, header.def_name
            header.new_mode = _mode(value[14:], number)
        elif line.startswith(("copy from ", "copy to ", "rename old ", "rename new ", "rename from ", "rename to ")):
            verb, _, rest = value.partition(" ")
            side, _, raw = rest.partition(" ")
            name = find_name(raw, None, 0, terminate="")
            header.names.extend(candidates(raw, 0))
            if verb == "copy":
                header.is_copy = True
            else:
                header.is_rename = True
            if side in ("from", "old"):
                header.old_name = name
            else:
                header.new_name = name
        elif line.startswith(("similarity index ", "dissimilarity index ")):
            pass
        elif line.startswith("index "):
            ids = value[6:].split(" ", 1)[0].split("..")
            if len(ids) == 2:
                header.index = (ids[0], ids[1])
            mode = _index_mode(value[6:])
            if mode is not None:
                header.old_mode = _mode(mode, number)
        else:
            return False
        if header.is_delete + header.is_new + header.is_rename + header.is_copy > 1:
            raise _fail(number, "inconsistent header lines (a file both new, deleted, renamed or copied)")
        return True

    def _verify_name(self, header: _Header, raw: str, is_null: bool, name: str | None, number: int,
                     side: str) -> str | None:
        header.names.extend(candidates(raw, self.p_value))
        if name is None and not is_null:
            return find_name(raw, None, self.p_value, terminate="\t")
        if name is not None:
            if is_null:
                raise _fail(number, f"expected /dev/null, got {name}")
            if find_name(raw, None, self.p_value, terminate="\t") != name:
                raise _fail(number, f"inconsistent {side} file name")
            return name
        if not is_dev_null(raw):
            raise _fail(number, "expected /dev/null")
        return None

    def _traditional_header(self, index: int) -> _Header:
        first, second = self.lines[index][4:].rstrip("\n"), self.lines[index + 1][4:].rstrip("\n")
        if not self.p_known:
            p, q = guess_p_value(first), guess_p_value(second)
            if p < 0:
                p = q
            if 0 <= p == q:
                self.p_value, self.p_known = p, True
        header = _Header()
        header.names.extend(candidates(first, self.p_value) + candidates(second, self.p_value))
        if is_dev_null(first):
            header.is_new = True
            name = header.new_name = find_name_traditional(second, None, self.p_value)
        elif is_dev_null(second):
            header.is_delete = True
            name = header.old_name = find_name_traditional(first, None, self.p_value)
        else:
            first_name = find_name_traditional(first, None, self.p_value)
            name = find_name_traditional(second, first_name, self.p_value)
            header.old_name = header.new_name = name
        if name is None:
            raise _fail(index + 1, "no file name in the ---/+++ lines")
        return header

    def _file(self, start: int, end: int, header: _Header) -> tuple[FilePatch, int]:
        lines = self.lines
        is_git = lines[start].startswith(_DIFF_GIT)
        hunks: list[Hunk] = []
        index = end
        while index < len(lines) and lines[index].startswith("@@ -") and len(lines[index]) > 4:
            hunk, index = self._hunk(index, header)
            hunks.append(hunk)
        old_lines = sum(hunk.source_length for hunk in hunks)
        new_lines = sum(hunk.target_length for hunk in hunks)
        if header.is_new and old_lines:
            raise _fail(start + 1, f"new file {header.new_name} depends on old contents")
        if header.is_delete and new_lines:
            raise _fail(start + 1, f"deleted file {header.old_name} still has contents")
        binary: list[str] = []
        if not hunks and index < len(lines):
            if lines[index] == GIT_BINARY:
                index = self._binary(index, binary)
            elif lines[index].endswith(" differ\n") and lines[index].startswith(("Binary files ", "Files ")):
                binary.append(lines[index])
                index += 1
        metadata = header.is_new or header.is_delete or header.is_rename or header.is_copy or (
            header.old_mode is not None and header.new_mode is not None and header.old_mode != header.new_mode)
        if not hunks and not binary and not metadata:
            raise _fail(start + 1, "a file with nothing to apply (patch with only garbage)")
        old_path = None if header.is_new else header.old_name
        new_path = None if header.is_delete else header.new_name
        names = tuple(dict.fromkeys(name for name in [*header.names, old_path, new_path] if name))
        return FilePatch(
            header=tuple(lines[start:end]), old_path=old_path, new_path=new_path,
            old_mode=header.old_mode, new_mode=header.new_mode, is_rename=header.is_rename,
            is_copy=header.is_copy, is_git=is_git, index=header.index, hunks=tuple(hunks), binary=tuple(binary), names=names,
        ), index

    def _hunk(self, index: int, header: _Header) -> tuple[Hunk, int]:
        lines = self.lines
        counts = _fragment_header(lines[index])
        if counts is None:
            raise _fail(index + 1, f"a malformed hunk header {lines[index].rstrip()!r}")
        source_start, old_lines, target_start, new_lines = counts
        source_length, target_length = old_lines, new_lines
        body_start = index + 1
        position = body_start
        added = removed = 0
        while position < len(lines) and (old_lines > 0 or new_lines > 0):
            line = lines[position]
            # git refuses a last line without its line end; a diff held in a stripped string (an
            # API's answer) lost only that, so it is read as if it were there.
            if not line.endswith("\n") and position + 1 < len(lines):
                raise _fail(position + 1, "a hunk line without a line end inside the hunk")
            first = line[0]
            if first in " \n":
                old_lines -= 1
                new_lines -= 1
            elif first == "-":
                old_lines -= 1
                removed += 1
            elif first == "+":
                new_lines -= 1
                added += 1
            elif first == "\\":
                if len(line) < 12 or not line.startswith("\\ "):
                    raise _fail(position + 1, "a malformed line in a hunk")
            else:
                raise _fail(position + 1, f"a hunk shorter than its header says ({line.rstrip()[:40]!r})")
            position += 1
        if old_lines or new_lines:
            raise _fail(index + 1, "a hunk whose line counts do not match its body")
        if not added and not removed:
            raise _fail(index + 1, "a hunk that changes nothing")
        # A last line without a line end is followed by its marker, after the counts ran out.
        if position < len(lines) and lines[position].startswith("\\ ") and self.rest[position] > 12:
            position += 1
        hunk = Hunk(lines[index], source_start, source_length, target_start, target_length,
                    tuple(lines[body_start:position]))
        return hunk, position

    def _binary(self, index: int, binary: list[str]) -> int:
        """A ``GIT binary patch`` block: a forward hunk and an optional reverse one, each a
        ``literal N``/``delta N`` line, length-prefixed base-85 lines and a blank line."""
        lines = self.lines
        binary.append(lines[index])
        position = index + 1
        for hunk_number in range(2):
            if position >= len(lines) or not lines[position].startswith(("literal ", "delta ")):
                if hunk_number == 0:
                    raise _fail(position + 1, "a binary patch without a literal or delta hunk")
                break
            binary.append(lines[position])
            position += 1
            while True:
                if position >= len(lines):
                    raise _fail(position, "a binary patch that does not end with a blank line")
                line = lines[position]
                binary.append(line)
                position += 1
                if line == "\n":
                    break
                if not _is_base85_line(line):
                    raise _fail(position, "a corrupt binary patch")
        return position


def _is_base85_line(line: str) -> bool:
    length = len(line)
    if length < 7 or (length - 2) % 5 or not line.endswith("\n"):
        return False
    byte = line[0]
    if "A" <= byte <= "Z":
        count = ord(byte) - ord("A") + 1
    elif "a" <= byte <= "z":
        count = ord(byte) - ord("a") + 27
    else:
        return False
    most = (length - 2) // 5 * 4
    return most - 4 < count <= most


def _fragment_header(line: str) -> tuple[int, int, int, int] | None:
    """git's parse_fragment_header: ``@@ -a[,b] +c[,d] @@`` and anything after."""
    if not line.endswith("\n"):
        return None
    match = HUNK_HEADER.match(line)
    if match is None:
        return None
    a, b, c, d = match.groups()
    return int(a), int(b) if b is not None else 1, int(c), int(d) if d is not None else 1


def _mode(text: str, number: int) -> str:
    mode = text.strip()
    if not mode or any(char not in "01234567" for char in mode):
        raise _fail(number, f"invalid mode {text!r}")
    return mode


def _index_mode(text: str) -> str | None:
    """The mode at the end of an ``index abc..def 100644`` line, if any."""
    dots = text.find("..")
    if dots < 0:
        return None
    rest = text[dots + 2:]
    space = rest.find(" ")
    return rest[space + 1:] if space >= 0 else None


