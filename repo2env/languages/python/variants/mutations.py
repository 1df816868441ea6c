"""The near-miss mutations, one class each on :class:`~repo2env.languages.python.variants.base.Mutation`:
undo one changed statement, flip one comparison, alter one returned value."""

from __future__ import annotations

import difflib
import functools
import textwrap
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from repo2env import pysyntax
from repo2env.languages.python.variants.base import (
    Build,
    Mutation,
    SourceFile,
    changed_nodes,
    shortened,
    snippet,
    spliced,
    text_lines,
    with_span_replaced,
)

# How alike a removed and an added statement in different places must be to count as one moved.
_MOVED_SIMILARITY = 0.6
# Statement pairs whose similarity is computed, at most, per pairing (about a second's work).
_PAIRING_BUDGET = 20_000
_CLAUSES = (cst.Else, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally, cst.MatchCase)
_FLIPPED_OPERATORS: dict[type[cst.BaseCompOp], str] = {
    cst.LessThan: "<=",
    cst.LessThanEqual: "<",
    cst.GreaterThan: ">=",
    cst.GreaterThanEqual: ">",
    cst.Equal: "!=",
    cst.NotEqual: "==",
    cst.In: "not in",
    cst.NotIn: "in",
    cst.Is: "is not",
    cst.IsNot: "is",
}


@dataclass(frozen=True)
class _Statement:
    """A statement's own lines: a simple statement whole, a compound one from its first decorator
    to its colon (its body and clauses are statements of their own)."""

    kind: str  #: the libcst node type: SimpleStatementLine, If, Else, FunctionDef ...
    first: int  #: 1-based
    last: int  #: last own line
    end: int  #: last line of the whole statement, body and clauses included
    key: str  #: the own lines, dedented: what the alignment compares

    @property
    def compound(self) -> bool:
        return self.kind != "SimpleStatementLine"


class UndoStatement(Mutation):
    """One changed statement undone (see :meth:`sites`)."""

    kind = "undo-statement"

    def sites(self, source: SourceFile) -> Iterator[tuple[str, Build]]:
        """Each changed statement of the file undone alone: description, build.

        The statements of both versions are aligned like lines in a diff, on their dedented text. In
        each changed stretch new statements are paired with old ones of the same kind, most similar
        pairs first; what is left is paired across stretches when alike (a statement the fix moved
        and changed). A paired new statement goes back to its old form, an unpaired one is dropped,
        and an unpaired old one is put back.
        """
        path, new_lines = source.path, source.lines
        try:
            old_positions = MetadataWrapper(cst.parse_module(source.old), unsafe_skip_copy=True).resolve(PositionProvider)
        except cst.ParserSyntaxError:
            return
        old_lines = text_lines(source.old)
        olds, news = _statements(old_positions, old_lines), _statements(source.positions, new_lines)
        matcher = difflib.SequenceMatcher(None, [s.key for s in olds], [s.key for s in news], autojunk=False)
        stretches = [opcode[1:] for opcode in matcher.get_opcodes() if opcode[0] != "equal"]
        pairs: dict[int, int] = {}  # new statement index -> old statement index
        for old_start, old_end, new_start, new_end in stretches:
            inside = _paired(olds[old_start:old_end], news[new_start:new_end])
            pairs.update({new_start + new_index: old_start + old_index for new_index, old_index in inside.items()})
        left_news = [index for *_, start, end in stretches for index in range(start, end) if index not in pairs]
        taken = set(pairs.values())
        left_olds = [index for start, end, *_ in stretches for index in range(start, end) if index not in taken]
        moved = _paired([olds[i] for i in left_olds], [news[i] for i in left_news], minimum=_MOVED_SIMILARITY)
        pairs.update({left_news[new_index]: left_olds[old_index] for new_index, old_index in moved.items()})
        counterparts = {old_index: new_index for new_index, old_index in pairs.items()}

        for old_start, old_end, new_start, new_end in stretches:
            for index in range(new_start, new_end):
                statement = news[index]
                if index in pairs:
                    yield _reverted(path, statement, olds[pairs[index]], old_lines, new_lines)
                else:
                    last = statement.end if statement.compound else statement.last
                    yield (
                        f"drop `{shortened(statement.key)}` (line {statement.first} of {path}), which the fix added",
                        functools.partial(spliced, new_lines, statement.first - 1, last, []),
                    )
            # The statement before a stretch is aligned with the one before it in the other version.
            anchor = news[new_start - 1].last if new_start else 0
            for index in range(old_start, old_end):
                statement = olds[index]
                counterpart = counterparts.get(index)
                if counterpart is not None:
                    if new_start <= counterpart < new_end:
                        anchor = news[counterpart].last
                elif not any(
                    other is not statement and other.first <= statement.first <= other.end
                    for other in olds[old_start:old_end]
                ):  # a statement nested in another removed one comes back with it
                    yield _restored(path, statement, anchor, old_lines, new_lines)


def _reverted(
    path: str, statement: _Statement, counterpart: _Statement, old_lines: list[str], new_lines: list[str]
) -> tuple[str, Build]:
    """``statement``'s own lines replaced by ``counterpart``'s, at ``statement``'s indentation."""
    block = _reindented(
        old_lines[counterpart.first - 1 : counterpart.last],
        _indentation(old_lines[counterpart.first - 1]),
        _indentation(new_lines[statement.first - 1]),
    )
    return (
        f"revert `{shortened(statement.key)}` (line {statement.first} of {path}) to `{shortened(counterpart.key)}`",
        functools.partial(spliced, new_lines, statement.first - 1, statement.last, block),
    )


def _restored(
    path: str, statement: _Statement, anchor: int, old_lines: list[str], new_lines: list[str]
) -> tuple[str, Build]:
    """The removed ``statement`` put back after new line ``anchor``.

    ``anchor`` ends the own lines of the new counterpart of the old statement just before it:
    there the removed one sat (if that statement is a compound header, it opened its body).
    """
    last = statement.end if statement.compound else statement.last
    return (
        f"restore `{shortened(statement.key)}` (after line {anchor} of {path}), which the fix removed",
        functools.partial(spliced, new_lines, anchor, anchor, old_lines[statement.first - 1 : last]),
    )


def _paired(olds: Sequence[_Statement], news: Sequence[_Statement], *, minimum: float = 0.0) -> dict[int, int]:
    """Indices of new statements mapped to those of old ones of their kind, most similar first;
    pairs less similar than ``minimum`` (``difflib`` ratio of their text) are not made.

    Most-similar-first rather than first-come: when a fix adds ``if item not in stock:`` above a
    rewritten ``if available(...) >= wanted:``, the rewritten one gets the old ``if``.
    """
    old_kinds = Counter(statement.kind for statement in olds)
    if sum(old_kinds[statement.kind] for statement in news) > _PAIRING_BUDGET:
        # A rewritten file: comparing every pair would take minutes. Pair in order instead.
        return {} if minimum else _paired_in_order(olds, news)
    scored = sorted(
        (-difflib.SequenceMatcher(None, old.key, new.key, autojunk=False).ratio(), new_index, old_index)
        for new_index, new in enumerate(news)
        for old_index, old in enumerate(olds)
        if old.kind == new.kind
    )
    pairs: dict[int, int] = {}
    used: set[int] = set()
    for negated_ratio, new_index, old_index in scored:
        if -negated_ratio < minimum:
            break
        if new_index not in pairs and old_index not in used:
            pairs[new_index] = old_index
            used.add(old_index)
    return pairs


def _paired_in_order(olds: Sequence[_Statement], news: Sequence[_Statement]) -> dict[int, int]:
    """Each kind's k-th new statement paired with its k-th old one."""
    pairs: dict[int, int] = {}
    for kind in dict.fromkeys(statement.kind for statement in news):
        new_indices = [index for index, statement in enumerate(news) if statement.kind == kind]
        old_indices = [index for index, statement in enumerate(olds) if statement.kind == kind]
        pairs.update(zip(new_indices, old_indices, strict=False))
    return pairs


def _statements(positions: Mapping[cst.CSTNode, CodeRange], lines: list[str]) -> list[_Statement]:
    """Every statement and clause (``else``, ``except`` ...) of a module, in source order."""
    statements: list[_Statement] = []
    for node, span in positions.items():
        if isinstance(node, cst.SimpleStatementLine):
            first, last = span.start.line, span.end.line
        elif isinstance(node, (cst.BaseCompoundStatement, *_CLAUSES)):
            decorators = getattr(node, "decorators", ())
            first = positions[decorators[0]].start.line if decorators else span.start.line
            last = _header_end(node, positions)
        else:
            continue
        key = textwrap.dedent("".join(lines[first - 1 : last]))
        statements.append(_Statement(type(node).__name__, first, last, span.end.line, key))
    statements.sort(key=lambda statement: (statement.first, statement.last))
    return statements


def _header_end(node: cst.CSTNode, positions: Mapping[cst.CSTNode, CodeRange]) -> int:
    """The line of a compound statement's colon (its header's last line)."""
    body = getattr(node, "body", None)
    if isinstance(body, cst.IndentedBlock):
        # The block's header is what follows the colon on its line (a comment, the newline).
        return positions[body.header].start.line
    if isinstance(body, cst.SimpleStatementSuite):
        return positions[body].end.line
    if isinstance(node, cst.Match):
        return positions[node.whitespace_after_colon].start.line
    return positions[node].start.line


def _indentation(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _reindented(block: list[str], old_indentation: str, new_indentation: str) -> list[str]:
    """``block`` moved from one indentation to another (a fix may nest code deeper)."""
    if old_indentation == new_indentation:
        return block
    return [
        new_indentation + line[len(old_indentation) :] if line.startswith(old_indentation) else line for line in block
    ]


class FlipCompare(Mutation):
    """One comparison operator flipped: ``<``/``<=``, ``>``/``>=``, ``==``/``!=``, ``in``/``not in``,
    ``is``/``is not``."""

    kind = "flip-compare"

    def sites(self, source: SourceFile) -> Iterator[tuple[str, Build]]:
        changed = source.changed
        for comparison in changed_nodes(source.positions, cst.Comparison, changed):
            for target in comparison.comparisons:
                span = source.positions[target.operator]
                flipped = _FLIPPED_OPERATORS[type(target.operator)]
                operator = shortened(source.module.code_for_node(target.operator))
                yield (
                    f"flip `{operator}` to `{flipped}` on line {span.start.line} of {source.path}",
                    functools.partial(with_span_replaced, source.lines, span, flipped),
                )


class AlterReturn(Mutation):
    """One returned value changed: ``True``/``False`` swapped, a number n made n + 1, a string
    emptied, anything else made ``None``."""

    kind = "alter-return"

    def sites(self, source: SourceFile) -> Iterator[tuple[str, Build]]:
        changed = source.changed
        for statement in changed_nodes(source.positions, cst.Return, changed):
            value = statement.value
            altered = None if value is None else _altered_value(value)
            if value is None or altered is None:
                continue
            # The value's span leaves out its parentheses, so "return(x)" becomes "return(None)".
            span = source.positions[value]
            yield (
                f"return `{altered}` instead of `{snippet(source.module, value)}` "
                f"on line {span.start.line} of {source.path}",
                functools.partial(with_span_replaced, source.lines, span, altered),
            )


def _altered_value(value: cst.BaseExpression) -> str | None:
    """The code ``return value`` returns instead, or ``None`` when it already returns ``None``."""
    match value:
        case cst.Name(value="True"):
            return "False"
        case cst.Name(value="False"):
            return "True"
        case cst.Name(value="None"):
            return None
        case cst.Integer() | cst.Float():
            return repr(pysyntax.literal_eval(value.value) + 1)
        case cst.SimpleString():
            if pysyntax.string_value(value) in ("", b""):
                return "None"
            # Keep bytes bytes: only the content should be wrong, not the type.
            return 'b""' if "b" in value.prefix.lower() else '""'
        case cst.ConcatenatedString() | cst.FormattedString():
            return '""'
    return "None"


#: The near-miss mutations in their round-robin order.
MUTATIONS: tuple[Mutation, ...] = (UndoStatement(), FlipCompare(), AlterReturn())
