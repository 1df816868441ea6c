"""Strip from an issue's text what gives its fix away, and say how much the original gave away.

An issue written after the fix often points at it: a link to the PR, a commit SHA, a code block
with the fixed code. Left in a problem statement, the agent copies instead of solving. What is cut:

- links to the PR (``https://HOST/owner/name/pull/N...``, also in ``[text](url)`` form) and the
  references ``#N`` / ``owner/name#N`` to the PR itself, replaced by ``[link removed]``;
- links to commits (``.../commit/<sha>``) when the SHA is one of the fix's commits (in any
  repository, so a fork's link counts) or a full 40-hex SHA, replaced by ``[link removed]``;
- bare SHAs: a 7-40 hex word that is a prefix of one of the fix's commits, and any 40-hex word,
  replaced by ``[commit removed]``; shorter hex words such as ``deadbeef`` stay unless they are
  such a prefix;
- fenced code blocks (three or more backticks or tildes) whose lines are mostly the fix: at least half of their
  non-trivial lines (see below) are, whitespace-stripped, lines the gold patch adds. In a block
  that is itself a diff (info string ``diff``/``patch``, or ``@@``/``diff --git`` lines) only
  its ``+`` lines are compared. The block becomes ``[code removed]``. A block of the *failing*
  usage (a reproducer, a traceback) shares few lines with the fix and stays.

Everything else is kept byte for byte. A *trivial* line is blank, shorter than 8 characters, only
brackets and punctuation, an import, a bare decorator, or boilerplate such as ``else:`` or
``return None``: such lines match by chance and prove nothing (the rule and the measure are
:mod:`repo2env.leakage`'s, which validation's check of an instruction's Interface section shares).

``leak_score`` describes the original text: 1.0 when it linked or referred to the PR or to one of
the fix's commits; otherwise the fraction of the gold patch's distinct non-trivial added lines
that occur verbatim (whitespace-stripped, anywhere, inline code included) in the text; 0.0 when
nothing leaked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from repo2env.leakage import fix_line_share, fix_lines, is_trivial_line
from repo2env.mine.linking import FencedCodeBlock, fenced_code_blocks

LINK_MARKER = "[link removed]"
COMMIT_MARKER = "[commit removed]"
CODE_MARKER = "[code removed]"

#: Share of a code block's non-trivial lines that must come from the fix for the block to go.
CODE_BLOCK_THRESHOLD = 0.5
_SHORT_SHA_LENGTH = 7
_FULL_SHA_LENGTH = 40

_LINK = re.compile(
    r"(?:https?://(?:www\.)?|www\.)[\w.-]+(?::\d+)?/(?P<repo>[\w.-]+/[\w.-]+)/"
    r"(?:pulls?/(?P<pull>\d+)(?!\d)|commits?/(?P<sha>[0-9a-fA-F]{7,40})(?![0-9A-Za-z]))"
    # The rest of the URL, without the punctuation that ends the sentence around it.
    r"(?:[/#?](?:[^\s)\]>]*[^\s)\]>.,;:!?'\"])?)?"
)
# Around a cut link, a Markdown link's "[text](" and its ")" go too, but only both together, so
# a URL in prose parentheses keeps its closing bracket.
_MARKDOWN_LINK_OPENING = re.compile(r"\[[^\]\n]*\]\([ \t]*\Z")
_MARKDOWN_LINK_CLOSING = re.compile(r"[^)\n]*\)")
_HEX_WORD = re.compile(r"\b[0-9a-fA-F]{7,40}+\b")
# Maps every hex digit's byte to 1 and every other byte to 0, to find hex runs without a regex.
_HEX_BYTES = bytes(1 if chr(byte) in "0123456789abcdefABCDEF" else 0 for byte in range(256))
_SHORT_HEX_RUN = b"\x01" * _SHORT_SHA_LENGTH
_FULL_HEX_RUN = b"\x01" * _FULL_SHA_LENGTH
_DIFF_INFO = frozenset({"diff", "patch"})


@dataclass(frozen=True, slots=True)
class LeakResult:
    """The cleaned text, how much the original leaked (0 to 1), and what was cut: code blocks,
    then links, references and SHAs, each kind in text order."""

    text: str
    leak_score: float
    removed: tuple[str, ...]


def strip_leaks(
    text: str, *, gold_patch: str, repo: str, pull_number: int, commit_shas: Iterable[str]
) -> LeakResult:
    """Remove links, references, SHAs and code blocks that reveal the fix (rules: module doc).

    ``repo`` is ``owner/name``, ``pull_number`` the fixing PR, ``commit_shas`` its commits (full
    or abbreviated). The rest of ``text`` is unchanged; ``leak_score`` rates the original text.
    """
    added, _ = fix_lines(gold_patch)
    scan = _LeakScan(repo.lower(), pull_number, _normalized_shas(commit_shas), added)
    cleaned = scan.cut_code_blocks(text)
    cleaned = scan.cut_links(cleaned)
    cleaned = scan.cut_references(cleaned)
    cleaned = scan.cut_shas(cleaned)
    score = 1.0 if scan.points_at_fix else fix_line_share(text, gold_patch)
    return LeakResult(text=cleaned, leak_score=score, removed=tuple(scan.removed))


class _LeakScan:
    """The cuts for one text: each pass returns the text without what it found, records what it
    cut, and notes whether the text pointed at the PR or one of its commits.

    Each pass first asks, with plain substring tests, whether the text can hold anything for it:
    Python's regex engine is the costly part and most issues hold nothing to cut.
    """

    def __init__(self, repo: str, pull_number: int, fix_shas: tuple[str, ...], fix_lines: frozenset[str]) -> None:
        self.repo = repo
        self.pull_number = pull_number
        self.fix_shas = fix_shas
        self.fix_lines = fix_lines
        self.removed: list[str] = []
        self.points_at_fix = False

    def cut_code_blocks(self, text: str) -> str:
        if not self.fix_lines:
            return text
        cuts = []
        for block in fenced_code_blocks(text):
            from_fix, compared = self._lines_from_fix(block)
            if compared and from_fix >= CODE_BLOCK_THRESHOLD * compared:
                self.removed.append(f"code block ({from_fix}/{compared} lines from the fix)")
                cuts.append((block.start, block.end, CODE_MARKER))
        return _spliced(text, cuts)

    def cut_links(self, text: str) -> str:
        lowered = text.lower()
        pull = str(self.pull_number)
        if f"/pull/{pull}" not in lowered and f"/pulls/{pull}" not in lowered and "/commit" not in lowered:
            return text
        cuts = []
        for link in _LINK.finditer(text):
            if not self._link_points_at_fix(link):
                continue
            start, end = link.span()
            opening = _MARKDOWN_LINK_OPENING.search(text, text.rfind("\n", 0, start) + 1, start)
            closing = _MARKDOWN_LINK_CLOSING.match(text, end) if opening else None
            if opening and closing:
                start, end = opening.start(), closing.end()
            cuts.append((start, end, LINK_MARKER))
        return _spliced(text, cuts)

    def cut_references(self, text: str) -> str:
        needle = f"#{self.pull_number}"
        cuts = []
        found = text.find(needle)
        while found >= 0:
            end = found + len(needle)
            start = None if end < len(text) and _is_word_character(text[end]) else self._reference_start(text, found)
            if start is not None:
                self.removed.append(f"reference to PR #{self.pull_number}")
                self.points_at_fix = True
                cuts.append((start, end, LINK_MARKER))
            found = text.find(needle, end)
        return _spliced(text, cuts)

    def cut_shas(self, text: str) -> str:
        hex_mask = text.encode("utf-8", "replace").translate(_HEX_BYTES)
        if _FULL_HEX_RUN not in hex_mask and not (
            _SHORT_HEX_RUN in hex_mask and any(sha[:_SHORT_SHA_LENGTH] in text.lower() for sha in self.fix_shas)
        ):
            return text
        return _HEX_WORD.sub(self._hex_word, text)

    def _lines_from_fix(self, block: FencedCodeBlock) -> tuple[int, int]:
        """How many of the block's non-trivial lines the fix adds, and how many there are."""
        lines = block.body.splitlines()
        if block.info.split(" ", 1)[0].lower() in _DIFF_INFO or any(
            line.startswith(("@@ ", "diff --git ")) for line in lines
        ):
            plus_lines = [line[1:] for line in lines if line.startswith("+") and not line.startswith("+++")]
            lines = plus_lines or lines
        compared = [stripped for line in lines if not is_trivial_line(stripped := line.strip())]
        return sum(1 for line in compared if line in self.fix_lines), len(compared)

    def _link_points_at_fix(self, link: re.Match[str]) -> bool:
        """Whether to cut this link; notes a PR or fix-commit link."""
        pull, sha = link.group("pull"), link.group("sha")
        if pull is not None:
            if int(pull) != self.pull_number or link.group("repo").lower() != self.repo:
                return False
            self.removed.append(f"link to PR #{pull}")
            self.points_at_fix = True
            return True
        sha = sha.lower()
        is_fix = self._is_fix_sha(sha)
        if not is_fix and len(sha) < _FULL_SHA_LENGTH:
            return False
        self.removed.append(f"link to commit {sha[:_SHORT_SHA_LENGTH]}")
        self.points_at_fix = self.points_at_fix or is_fix
        return True

    def _reference_start(self, text: str, hash_index: int) -> int | None:
        """Where the reference to the PR whose ``#`` is at ``hash_index`` starts, if it is one."""
        if hash_index == 0 or not (_is_word_character(text[hash_index - 1]) or text[hash_index - 1] in "&/#.-"):
            return hash_index
        # Glued to a word: only "owner/name#N" of this very repository is the PR.
        start = hash_index - len(self.repo)
        if start < 0 or text[start:hash_index].lower() != self.repo:
            return None
        if start > 0 and (_is_word_character(text[start - 1]) or text[start - 1] in "./-"):
            return None
        return start

    def _hex_word(self, match: re.Match[str]) -> str:
        word = match.group().lower()
        is_fix = self._is_fix_sha(word)
        if not is_fix and len(word) < _FULL_SHA_LENGTH:
            return match.group()
        self.removed.append(f"commit sha {word[:_SHORT_SHA_LENGTH]}")
        self.points_at_fix = self.points_at_fix or is_fix
        return COMMIT_MARKER

    def _is_fix_sha(self, sha: str) -> bool:
        return any(fix.startswith(sha) or sha.startswith(fix) for fix in self.fix_shas)


def _normalized_shas(commit_shas: Iterable[str]) -> tuple[str, ...]:
    # An abbreviation under 7 characters would match ordinary hex words.
    return tuple({sha.strip().lower() for sha in commit_shas if len(sha.strip()) >= _SHORT_SHA_LENGTH})


def _is_word_character(character: str) -> bool:
    return character.isalnum() or character == "_"


def _spliced(text: str, cuts: list[tuple[int, int, str]]) -> str:
    """``text`` with each ``(start, end, replacement)`` of ``cuts`` (in order, disjoint) applied."""
    if not cuts:
        return text
    pieces, position = [], 0
    for start, end, replacement in cuts:
        pieces += (text[position:start], replacement)
        position = end
    pieces.append(text[position:])
    return "".join(pieces)
