"""Which issues a pull request closes, read from its title, body and commit messages.

The rules follow GitHub's closing keywords: ``close``, ``closes``, ``closed``, ``fix``, ``fixes``,
``fixed``, ``resolve``, ``resolves``, ``resolved`` as whole words in any case (a hyphen joins
words: ``re-fixes`` is no keyword), optionally followed by a colon, then a reference to an issue of
the same repository: ``#N``, ``owner/name#N`` or an issue URL (``http``/``https``, optional
``www.``, any host so GitHub Enterprise counts). A bare mention (``see #4``, ``#6``) closes nothing.

Two deliberate departures from GitHub:

- A list after one keyword counts entirely: ``Fixes #1, #2 and #3`` closes 1, 2 and 3. GitHub's
  documentation asks for a keyword per issue, but the author's intent is plain, and for mining a
  missed link costs a task while a list item is as much a fix claim as the first reference.
- Text that is not prose is ignored: fenced code blocks, inline code (on one line) and HTML
  comments, where PR templates keep their ``<!-- Fixes #123 -->`` examples.

:func:`fenced_code_blocks` is public because :mod:`repo2env.mine.leaks` reads issues the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

# Patterns run on lower-cased text: case-insensitive matching costs Python's regex engine about
# five times as much, and a leading look-behind as much again, so word boundaries are checked in
# code, on the few matches only.
_REFERENCE = (
    r"(?:"
    r"(?:https?://(?:www\.)?|www\.)[\w.-]+(?::\d+)?/[\w.-]+/[\w.-]+/issues/\d+(?![\w-]|\.\w)(?:[/#?][^\s,)]*)?"
    r"|(?:[\w.-]+/[\w.-]+)?#\d+(?!\w)"
    r")"
)
_CLOSING = re.compile(
    r"(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)(?:[ \t]*:[ \t]*|[ \t]+)"
    rf"{_REFERENCE}(?:(?:[ \t]*,[ \t]*(?:and[ \t]+)?|[ \t]+and[ \t]+){_REFERENCE})*"
)
_ONE_REFERENCE = re.compile(
    r"(?:https?://(?:www\.)?|www\.)[\w.-]+(?::\d+)?/(?P<url_repo>[\w.-]+/[\w.-]+)/issues/(?P<url_number>\d+)"
    r"|(?:(?P<short_repo>[\w.-]+/[\w.-]+))?#(?P<short_number>\d+)"
)
_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_INLINE_CODE = re.compile(r"(`+)(?!`)[^\n]*?(?<!`)\1(?!`)")
_FENCES = ("```", "~~~")


@dataclass(frozen=True, slots=True)
class FencedCodeBlock:
    """One fenced code block: ``text[start:end]`` runs from its opening fence to the end of its
    closing fence line (line break excluded), or to the end of the text when it is never closed."""

    start: int
    end: int
    info: str  #: the info string after the opening fence, stripped: "python", "diff", ""
    body: str  #: the text between the fence lines


def closing_issue_refs(text: str, repo: str) -> list[int]:
    """Issue numbers of ``repo`` (``owner/name``) that ``text`` says it closes, first-seen order.

    Each number appears once; references to other repositories and bare mentions are left out,
    as is anything inside code (fenced or inline) or an HTML comment.
    """
    lowered = text.lower()
    if "#" not in lowered and "/issues/" not in lowered:
        return []
    repo = repo.lower()
    code_spans: list[tuple[int, int]] | None = None
    numbers: dict[int, None] = {}
    for closing in _CLOSING.finditer(lowered):
        start = closing.start()
        if start > 0 and (lowered[start - 1].isalnum() or lowered[start - 1] in "_-"):
            continue
        if code_spans is None:
            code_spans = _code_spans(lowered)
        if _inside_code(lowered, start, code_spans):
            continue
        for reference in _ONE_REFERENCE.finditer(closing.group()):
            if reference.group("url_number") is not None:
                other_repo, number = reference.group("url_repo"), int(reference.group("url_number"))
            else:
                other_repo, number = reference.group("short_repo"), int(reference.group("short_number"))
            if (other_repo is None or other_repo == repo) and number > 0:
                numbers[number] = None
    return list(numbers)


def pr_closing_refs(title: str, body: str, commit_messages: Iterable[str], repo: str) -> list[int]:
    """Issues of ``repo`` a PR closes per its title, body and commit messages, first-seen order."""
    numbers: dict[int, None] = {}
    for text in (title, body, *commit_messages):
        if text:
            numbers.update(dict.fromkeys(closing_issue_refs(text, repo)))
    return list(numbers)


def fenced_code_blocks(text: str) -> list[FencedCodeBlock]:
    """Every fenced code block of ``text`` (GitHub Markdown), in order.

    A block opens at a line starting, after at most three spaces, with three or more backticks
    or tildes, and closes at a line holding only a fence of the same character at least as long;
    never closed, it runs to the end of the text, as CommonMark says.
    """
    blocks: list[FencedCodeBlock] = []
    opening: tuple[int, int, str, str] | None = None  # start, end of its line, fence, info
    for line_start, line_end in _fence_lines(text):
        marker = text[line_start:line_end].lstrip(" ")
        char = marker[0]
        run = len(marker) - len(marker.lstrip(char))
        rest = marker[run:]
        if opening is None:
            # A backtick fence's info string holds no backtick: "```x```" is inline code.
            if char != "`" or "`" not in rest:
                opening = (line_start, line_end, marker[:run], rest.strip())
        elif char == opening[2][0] and run >= len(opening[2]) and not rest.strip():
            end = line_end - 1 if text[line_end - 1] == "\r" else line_end
            blocks.append(FencedCodeBlock(opening[0], end, opening[3], text[opening[1] + 1 : line_start]))
            opening = None
    if opening is not None:
        blocks.append(FencedCodeBlock(opening[0], len(text), opening[3], text[opening[1] + 1 :]))
    return blocks


def _fence_lines(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of every line that starts, after at most three spaces, with a fence."""
    lines: set[tuple[int, int]] = set()
    # str.find skips through the text at C speed; a line-anchored regex tests every position.
    for fence in _FENCES:
        found = text.find(fence)
        while found >= 0:
            line_start = text.rfind("\n", 0, found) + 1
            line_end = text.find("\n", found)
            if line_end < 0:
                line_end = len(text)
            if found - line_start <= 3 and not text[line_start:found].strip(" "):
                lines.add((line_start, line_end))
            found = text.find(fence, line_end)
    return sorted(lines)


def _code_spans(text: str) -> list[tuple[int, int]]:
    spans = [(block.start, block.end) for block in fenced_code_blocks(text)]
    if "<!--" in text:
        spans.extend(comment.span() for comment in _HTML_COMMENT.finditer(text))
    return spans


def _inside_code(text: str, position: int, code_spans: list[tuple[int, int]]) -> bool:
    if any(start <= position < end for start, end in code_spans):
        return True
    # Inline code never spans lines here, so only the line holding the position is read.
    line_start = text.rfind("\n", 0, position) + 1
    line_end = text.find("\n", position)
    line_end = len(text) if line_end < 0 else line_end
    return any(
        code.start() <= position < code.end() for code in _INLINE_CODE.finditer(text, line_start, line_end)
    )
