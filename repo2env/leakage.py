"""How much of a fix a text gives away: one measure for the issue text (mining's
:func:`repo2env.mine.leaks.strip_leaks`, whose ``leak_score`` it computes) and for the Interface
section validation adds to an instruction (:func:`interface_leak`).

A fix is read as its gold patch's added lines. A *trivial* line is blank, shorter than 8
characters, only brackets and punctuation, an import, a bare decorator, or boilerplate such as
``else:`` or ``return None``: such lines match by chance and prove nothing. The others are the
fix's *telling* lines. A fix's *literals* are the quoted strings and the numbers its added lines hold.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from repo2env.patches import parse

_MIN_LINE_LENGTH = 8
_TRIVIAL_LINE = re.compile(r"[\W_]*|(?:import|from)\s.*|@[\w.]+(?:\(\))?")
_TRIVIAL_STATEMENTS = frozenset(
    {
        "else:",
        "try:",
        "finally:",
        "continue",
        "return None",
        "return True",
        "return False",
        "return self",
        "raise",
        "except Exception:",
        "except Exception as e:",
        "except Exception as exc:",
        "if __name__ == '__main__':",
        'if __name__ == "__main__":',
    }
)
_STRING_LITERAL = re.compile(r""""((?:[^"\\\n]|\\.)*)"|'((?:[^'\\\n]|\\.)*)'""")
_NUMBER_LITERAL = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")
#: An unquoted string literal of the fix counts as said by a text only from this length on.
_MIN_SAID_LENGTH = 3


# A PR's issue, its comments and its hints are cleaned against the same gold patch, one after another.
@lru_cache(maxsize=32)
def fix_lines(gold_patch: str) -> tuple[frozenset[str], tuple[str, ...]]:
    """The gold patch's distinct added lines, stripped, and those of them that are telling."""
    lines = frozenset(stripped for line in parse(gold_patch).added_lines if (stripped := line.strip()))
    return lines, tuple(sorted(line for line in lines if not is_trivial_line(line)))


def is_trivial_line(stripped_line: str) -> bool:
    """Whether a stripped line of code proves nothing when it recurs in a text (module doc)."""
    if len(stripped_line) < _MIN_LINE_LENGTH or stripped_line in _TRIVIAL_STATEMENTS:
        return True
    # Most code lines start with a letter that no trivial pattern starts with: skip the regex.
    first = stripped_line[0]
    return (not first.isalnum() or first in "if") and _TRIVIAL_LINE.fullmatch(stripped_line) is not None


def fix_line_share(text: str, gold_patch: str) -> float:
    """The share of the fix's telling lines that occur verbatim (anywhere) in ``text``."""
    _, telling = fix_lines(gold_patch)
    return sum(1 for line in telling if line in text) / len(telling) if telling else 0.0


@lru_cache(maxsize=32)
def fix_literals(gold_patch: str) -> tuple[str, ...]:
    """The quoted strings (as ``"..."``, whatever their quotes) and numbers of the added lines."""
    found: set[str] = set()
    for line in fix_lines(gold_patch)[0]:
        for match in _STRING_LITERAL.finditer(line):
            found.add('"' + (match.group(1) if match.group(1) is not None else match.group(2)) + '"')
        found.update(_NUMBER_LITERAL.findall(line))
    return tuple(sorted(found))


@dataclass(frozen=True, slots=True)
class InterfaceLeak:
    """What an Interface section reveals of the fix beyond the signatures: a score from 0 to 1
    (the share of the fix's telling lines, signature lines aside, and of its literals that the
    issue does not already say, found in the section) and the lines and literals found."""

    score: float
    leaked: tuple[str, ...]


def interface_leak(section: str, *, gold_patch: str, statement: str, signature_lines: Iterable[str]) -> InterfaceLeak:
    """How much ``section`` reveals of the fix beyond ``signature_lines`` (the stripped header
    lines of the definitions it shows, which it is allowed to tell) and beyond what ``statement``
    already says. A fix line counts when it occurs verbatim in the section; a literal (a default
    value, a string in an annotation) when it occurs quoted (either quote) or as a bare number."""
    allowed = {line.strip() for line in signature_lines}
    lines = [line for line in fix_lines(gold_patch)[1] if line not in allowed]
    literals = [literal for literal in fix_literals(gold_patch) if not _said(literal, statement)]
    leaked = [line for line in lines if line in section]
    leaked += [literal for literal in literals if _shown(literal, section)]
    measured = len(lines) + len(literals)
    return InterfaceLeak(len(leaked) / measured if measured else 0.0, tuple(leaked))


def _said(literal: str, text: str) -> bool:
    if not literal.startswith('"'):
        return re.search(rf"(?<![\w.]){re.escape(literal)}(?![\w])", text) is not None
    inner = literal[1:-1]
    return _shown(literal, text) or (len(inner) >= _MIN_SAID_LENGTH and inner in text)


def _shown(literal: str, text: str) -> bool:
    if not literal.startswith('"'):
        return re.search(rf"(?<![\w.]){re.escape(literal)}(?![\w.])", text) is not None
    inner = literal[1:-1]
    return f'"{inner}"' in text or f"'{inner}'" in text
