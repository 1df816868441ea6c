"""What the Python profile's variants of a gold patch share (the :class:`~repo2env.languages.variants.Variant`
record is every language's): the changed ``.py``
file parsed once with :mod:`libcst` (:class:`SourceFile`), the base of every near-miss mutation
(:class:`Mutation`), and the text helpers that splice a mutation in and write the patch.

A mutation, like SWE-smith's procedural modifiers, is one class: it names its kind and lists the
places of a changed file where it can break the fix, each with a description and a function that
builds the mutated text. Sites are many; only those drawn are built, checked and diffed.
"""

from __future__ import annotations

import ast
import difflib
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import ClassVar, Literal, TypeVar

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from repo2env import pysyntax
from repo2env.languages.variants import (  # noqa: F401 - re-exported for the variant modules
    Variant,
    VariantKind,
    diff_files,
    file_diff,
    text_lines,
)

MutationKind = Literal["undo-statement", "flip-compare", "alter-return"]

# Only modules are mutated: a stub (.pyi) never runs, so a mutated one would score like gold.
MUTABLE_SUFFIX = ".py"
_SNIPPET_CHARS = 60
Node = TypeVar("Node", bound=cst.CSTNode)

#: Makes a mutated file's text when called. Sites are many; only those drawn are built, and
#: checked (an ``ast`` parse) and diffed.
Build = Callable[[], str]


@dataclass(frozen=True)
class SourceFile:
    """A ``.py`` file the fix changed: both versions, parsed once."""

    path: str
    old: str  #: ``""`` for a file the fix creates
    new: str
    new_tree: str
    old_tree: str | None  #: ``None`` when the base version does not parse
    module: cst.Module
    positions: Mapping[cst.CSTNode, CodeRange]
    lines: list[str]  #: of ``new``
    changed: ChangedLines  #: where the fix changed ``new``

    @classmethod
    def parse(cls, path: str, old: str, new: str) -> SourceFile | None:
        """Both versions parsed, or ``None`` when ``ast`` or libcst cannot read the new one."""
        new_tree = syntax_tree(new)
        if new_tree is None:
            return None
        try:
            # The module is ours alone: the wrapper need not copy it to protect it.
            wrapper = MetadataWrapper(cst.parse_module(new), unsafe_skip_copy=True)
        except cst.ParserSyntaxError:
            return None
        positions = wrapper.resolve(PositionProvider)
        return cls(path, old, new, new_tree, syntax_tree(old), wrapper.module, positions, text_lines(new),
                   ChangedLines.between(old, new))

    def faithful(self, text: str) -> bool:
        """Whether mutated ``text`` parses and means something other than both versions."""
        tree = syntax_tree(text)
        return tree is not None and tree != self.new_tree and text != self.old and tree != self.old_tree


class Mutation(ABC):
    """One kind of near miss: where in a changed file it can break the fix, and how.

    :meth:`sites` yields, in source order, a one-sentence description of each place and a
    function that builds the file's mutated text; it looks only at code the fix added or changed.
    """

    kind: ClassVar[MutationKind]

    @abstractmethod
    def sites(self, source: SourceFile) -> Iterator[tuple[str, Build]]:
        """Every place of ``source`` this mutation can break: description, build."""


def syntax_tree(text: str) -> str | None:
    """``ast.dump`` of ``text`` (no positions, no comments), or ``None`` when it does not parse."""
    try:
        with warnings.catch_warnings():
            # An invalid escape in the project's own strings is not our concern.
            warnings.simplefilter("ignore")
            return ast.dump(pysyntax.parse(text))
    except (SyntaxError, ValueError, RecursionError):
        return None


@dataclass(frozen=True)
class ChangedLines:
    """Where a fix changed a file, in the new file's 1-based line numbers."""

    lines: frozenset[int]  #: lines the fix added or rewrote
    gaps: frozenset[int]  #: g such that the fix removed lines between new lines g and g + 1

    @classmethod
    def between(cls, old: str, new: str) -> ChangedLines:
        old_lines, new_lines = text_lines(old), text_lines(new)
        # Matching is quadratic in repeated lines, so the untouched head and tail are cut first
        # and blank lines may not anchor a match. Not autojunk: it would mark every common line,
        # such as "return None", changed.
        head = 0
        while head < min(len(old_lines), len(new_lines)) and old_lines[head] == new_lines[head]:
            head += 1
        tail = 0
        while tail < min(len(old_lines), len(new_lines)) - head and old_lines[-1 - tail] == new_lines[-1 - tail]:
            tail += 1
        matcher = difflib.SequenceMatcher(
            _is_blank, old_lines[head : len(old_lines) - tail], new_lines[head : len(new_lines) - tail], autojunk=False
        )
        lines: set[int] = set()
        gaps: set[int] = set()
        for tag, _, _, new_start, new_end in matcher.get_opcodes():
            if tag in ("replace", "insert"):
                lines.update(range(head + new_start + 1, head + new_end + 1))
            elif tag == "delete":
                gaps.add(head + new_start)
        return cls(frozenset(lines), frozenset(gaps))

    def touch(self, span: CodeRange) -> bool:
        """Whether the fix changed a line of ``span`` or removed one from inside it."""
        first, last = span.start.line, span.end.line
        return any(line in self.lines for line in range(first, last + 1)) or any(
            first <= gap < last for gap in self.gaps
        )


def _is_blank(line: str) -> bool:
    return not line.strip()


def changed_nodes(
    positions: Mapping[cst.CSTNode, CodeRange], node_type: type[Node], changed: ChangedLines
) -> list[Node]:
    """The nodes of ``node_type`` on changed lines, in source order."""
    nodes = [
        (span, node) for node, span in positions.items() if isinstance(node, node_type) and changed.touch(span)
    ]
    nodes.sort(key=lambda item: (item[0].start.line, item[0].start.column, item[0].end.line, item[0].end.column))
    return [node for _, node in nodes]


def with_span_replaced(lines: list[str], span: CodeRange, replacement: str) -> str:
    """The text of ``lines`` with what ``span`` covers replaced by ``replacement``.

    A text splice, not ``Module.deep_replace``: that re-renders the whole module, which takes
    most of a second on a file of a thousand lines. libcst's columns index the line as a ``str``.
    """
    start, end = span.start, span.end
    head = "".join(lines[: start.line - 1]) + lines[start.line - 1][: start.column]
    tail = lines[end.line - 1][end.column :] + "".join(lines[end.line :])
    return head + replacement + tail


def snippet(module: cst.Module, node: cst.CSTNode) -> str:
    return shortened(module.code_for_node(node))


def shortened(code: str) -> str:
    flat = " ".join(code.split())
    return flat if len(flat) <= _SNIPPET_CHARS else flat[: _SNIPPET_CHARS - 3] + "..."


def spliced(lines: list[str], start: int, stop: int, block: list[str]) -> str:
    """The text of ``lines`` with ``lines[start:stop]`` replaced by ``block``."""
    # A block's last line may have been the end of a file without a final newline.
    block = [line if line.endswith("\n") else line + "\n" for line in block]
    text = "".join(lines[:start] + block + lines[stop:])
    if lines and not lines[-1].endswith("\n") and text.endswith("\n"):
        text = text[:-1]  # the file has no final newline after the fix; the variant keeps it so
    return text


# --- writing patches -----------------------------------------------------------------------



