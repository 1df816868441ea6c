"""File names as ``git apply`` reads them from a header line: C-quoted names, the ``-p`` prefix
(guessed once from a plain diff), ``a/``/``b/`` names on a ``diff --git`` line, timestamps after a
traditional ``---`` name; and every name such a line could give, for checks that must never be
narrower than git (see :mod:`repo2env.patches`)."""

from __future__ import annotations

import re

from repo2env.patches.model import DEV_NULL

_C_ESCAPES = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92, '"': 34}


def _unquote_c(text: str) -> tuple[str, str] | None:
    """git's unquote_c_style: a ``"..."`` name with C escapes; (name, what follows) or ``None``."""
    if not text.startswith('"'):
        return None
    out = bytearray()
    position = 1
    while position < len(text):
        char = text[position]
        if char == '"':
            return out.decode("utf-8", errors="surrogateescape"), text[position + 1:]
        if char != "\\":
            out.extend(char.encode("utf-8", errors="surrogateescape"))
            position += 1
            continue
        position += 1
        if position >= len(text):
            return None
        char = text[position]
        if char in _C_ESCAPES:
            out.append(_C_ESCAPES[char])
            position += 1
        elif char in "0123" and len(text) >= position + 3 and all(c in "01234567" for c in text[position:position + 3]):
            out.append(int(text[position:position + 3], 8))
            position += 3
        else:
            return None
    return None


def _squash_slash(name: str | None) -> str | None:
    return re.sub("/{2,}", "/", name) if name is not None else None


def _find_name_gnu(line: str, p_value: int) -> str | None:
    unquoted = _unquote_c(line)
    if unquoted is None:
        return None
    name = unquoted[0]
    for _ in range(p_value):
        slash = name.find("/")
        if slash < 0:
            return None
        name = name[slash + 1:]
    return _squash_slash(name)


def _find_name_common(line: str, default: str | None, p_value: int, end: int | None, terminate: str) -> str | None:
    start = 0 if p_value == 0 else None
    position = 0
    limit = len(line) if end is None else end
    remaining = p_value
    while position < limit:
        char = line[position]
        # git's isspace: a \r ends a name whatever ``terminate`` says, a blank only when it says so.
        if end is None and char in " \t\r\n" and (char in "\r\n" or char in terminate):
            break
        position += 1
        if char == "/" and remaining:
            remaining -= 1
            if remaining == 0:
                start = position
    if start is None or position == start:
        return _squash_slash(default)
    name = line[start:position]
    if default is not None and len(default) < len(name) and name.startswith(default):
        return _squash_slash(default)
    return _squash_slash(name)


def find_name(line: str, default: str | None, p_value: int, *, terminate: str) -> str | None:
    if line.startswith('"'):
        name = _find_name_gnu(line, p_value)
        if name is not None:
            return name
    return _find_name_common(line, default, p_value, None, terminate)


_TIMESTAMP = re.compile(
    r"[\t ]+(?:\d\d)?\d\d-\d\d-\d\d(?: \d\d:\d\d:\d\d(?:\.\d+)?)?(?: [+-]\d\d:?\d\d)?$"
)


def find_name_traditional(line: str, default: str | None, p_value: int) -> str | None:
    if line.startswith('"'):
        name = _find_name_gnu(line, p_value)
        if name is not None:
            return name
    stamp = _TIMESTAMP.search(line) if line[-1:].isdigit() else None
    if stamp is None:
        return _find_name_common(line, default, p_value, None, "\t")
    return _find_name_common(line, default, p_value, stamp.start(), "")


def is_dev_null(line: str) -> bool:
    return line.startswith(DEV_NULL) and (len(line) == len(DEV_NULL) or line[len(DEV_NULL)].isspace())


def guess_p_value(line: str) -> int:
    if is_dev_null(line):
        return -1
    name = find_name_traditional(line, None, 0)
    if name is None:
        return -1
    return 0 if "/" not in name else -1


def _skip_tree_prefix(p_value: int, text: str) -> str | None:
    if not p_value:
        return None if text.startswith("/") else text
    remaining = p_value
    for position, char in enumerate(text):
        if char == "/":
            remaining -= 1
            if remaining <= 0:
                return None if position == 0 else text[position + 1:]
    return None


def git_header_name(p_value: int, rest: str) -> str | None:
    """git's git_header_name: the name of ``diff --git a/X b/X`` when both sides name the same X."""
    if rest.startswith('"'):
        first = _unquote_c(rest)
        if first is None:
            return None
        name = _skip_tree_prefix(p_value, first[0])
        second = first[1].lstrip()
        if name is None or not second:
            return None
        if second.startswith('"'):
            other = _unquote_c(second)
            other_name = _skip_tree_prefix(p_value, other[0]) if other else None
            return name if other_name == name else None
        other_name = _skip_tree_prefix(p_value, second)
        return name if other_name == name else None
    name = _skip_tree_prefix(p_value, rest)
    if name is None:
        return None
    quote = name.find('"')
    if quote >= 0:
        other = _unquote_c(name[quote:])
        other_name = _skip_tree_prefix(p_value, other[0]) if other else None
        if other_name is not None and len(other_name) < quote and name.startswith(other_name) and (
                name[len(other_name)].isspace()):
            return other_name
        return None
    for position, char in enumerate(name):
        if char in " \t":
            if position + 1 >= len(name):
                return None
            second = _skip_tree_prefix(p_value, name[position + 1:])
            if second is None:
                return None
            if second == name[:position]:
                return name[:position]
    return None


def diff_git_names(rest: str) -> list[str]:
    """Every name the two halves of a ``diff --git`` line could be (for checks, not for git)."""
    names: list[str] = []
    if rest.startswith('"'):
        first = _unquote_c(rest)
        if first is not None:
            names.append(first[0])
            second = first[1].lstrip()
            other = _unquote_c(second)
            names.append(other[0] if other else second)
    else:
        names.append(rest)
        for position, char in enumerate(rest):
            if char in " \t":
                names.append(rest[:position])
                tail = rest[position + 1:]
                other = _unquote_c(tail)
                names.append(other[0] if other else tail)
    return [stripped for name in names if (stripped := _skip_tree_prefix(1, name) or name)]


def candidates(raw: str, p_value: int) -> list[str]:
    """Every name a ``---``/``+++``/``rename`` value could give: whole, or cut at any blank
    (git cuts a timestamp off), each with ``p_value`` leading folders taken off."""
    if is_dev_null(raw):
        return []
    unquoted = _unquote_c(raw)
    texts = [unquoted[0]] if unquoted else []
    texts.append(raw)
    texts.extend(raw[:position] for position, char in enumerate(raw) if char in " \t\r")
    names = list(texts)
    for text in texts:
        name = _find_name_common(text, None, p_value, len(text), "") if p_value else text
        if name:
            names.append(name)
    return [name for name in names if name]


