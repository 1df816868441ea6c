"""Variants of a gold patch for reference rollouts: partial fixes, near misses and stubs.

A task is validated by grading reference patches: the gold patch must score 1.0 and the empty
patch 0. The variants made here show what lies between.

- :func:`partial_fixes` keeps a proper, non-empty subset of the gold patch's hunks, to show that
  partial credit exists.
- :func:`near_misses` applies the whole fix, then breaks it in one place with :mod:`libcst` (undo
  one changed statement, flip one comparison, alter one returned value), always in code the fix
  changed, to show that a patch which merely resembles the fix scores below it.
- :func:`stubs` applies the whole fix, then replaces the body of every function it changed with a
  trivial one (``return None``, ``return []`` ...), to show that the hidden tests check what the
  functions do, not only that they exist.

All are pure: text in, git-format patch text out; no git, no Docker.
"""

from __future__ import annotations

import ast
import difflib
import functools
import io
import itertools
import random
import re
import textwrap
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from repo2env.mine.split import hunks

VariantKind = Literal["partial", "near_miss", "stub"]
MutationKind = Literal["undo-statement", "flip-compare", "alter-return"]

#: Round-robin order of the near-miss kinds.
MUTATION_KINDS: tuple[MutationKind, ...] = ("undo-statement", "flip-compare", "alter-return")


@dataclass(frozen=True)
class Variant:
    """A patch to grade next to the gold one.

    ``kind`` is ``"partial"`` (a proper subset of the gold hunks) or ``"near_miss"`` (the whole
    fix, mutated in one place). ``name`` is unique among one call's variants and names the same
    variant whatever the ``limit`` (``hunks-1of3``, ``all-but-2of3``, ``flip-compare-1``).
    ``patch`` is a git-format diff that ``git apply`` accepts at the base commit; ``description``
    says in one sentence what the variant keeps or breaks.
    """

    kind: VariantKind
    name: str
    patch: str
    description: str


# --- partial fixes -------------------------------------------------------------------------

# Up to this many hunks every middle-sized subset is listed and shuffled; beyond, they are sampled.
_ENUMERATE_SUBSETS_UP_TO = 12
_SAMPLED_SUBSETS = 1000
_HUNK_HEADER = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)", re.DOTALL)


@dataclass(frozen=True)
class _GoldHunk:
    """One hunk of the gold patch, with its file's header, ready to be put in a patch again."""

    file_header: str
    path: str
    source_start: int
    source_length: int
    target_length: int
    section: str  #: what follows the closing ``@@``, newline included
    body: str

    @classmethod
    def parse(cls, piece: str) -> _GoldHunk:
        """Read one of :func:`~repo2env.mine.split.hunks`' single-hunk patches."""
        lines = io.StringIO(piece).readlines()
        at = next(index for index, line in enumerate(lines) if line.startswith("@@ "))
        match = _HUNK_HEADER.fullmatch(lines[at])
        if match is None:  # hunks() writes every header itself; anything else is a bug there
            raise ValueError(f"unexpected hunk header {lines[at]!r}")
        source_start, source_length, _, target_length, section = match.groups()
        file_header = "".join(lines[:at])
        return cls(
            file_header=file_header,
            path=_header_path(lines[:at]),
            source_start=int(source_start),
            source_length=int(source_length or 1),
            target_length=int(target_length or 1),
            section=section,
            body="".join(lines[at + 1 :]),
        )

    def rendered(self, offset: int) -> str:
        """The hunk with its new-side start moved by ``offset``: the net lines that the
        file's earlier hunks in the same patch add."""
        # An empty side is numbered by the line before it, as git numbers it.
        if self.source_length == 0:
            target_start = self.source_start + offset + 1
        elif self.target_length == 0:
            target_start = self.source_start + offset - 1
        else:
            target_start = self.source_start + offset
        header = f"@@ -{self.source_start},{self.source_length} +{target_start},{self.target_length} @@"
        return header + self.section + self.body


def partial_fixes(gold_patch: str, *, limit: int = 6, seed: int = 0) -> list[Variant]:
    """Up to ``limit`` proper, non-empty subsets of ``gold_patch``'s hunks, each a git patch.

    Every hunk counts, whatever its file. With k hunks the order is: each single hunk
    (``hunks-1of3``), then each "all but one" (``all-but-2of3``), then other subsets
    (``hunks-1+3of5``) in an order drawn from ``random.Random(seed)``; no subset twice, so a
    patch with one hunk gives ``[]``. The same arguments give the same list, and a smaller
    ``limit`` gives a prefix of it. Hunks of one file share one file section, renumbered on their
    new side, so each patch applies at the base commit. Files without hunks (binary, pure
    renames, mode changes) are in no variant. Raises
    :class:`~repo2env.errors.PatchError` when ``gold_patch`` cannot be parsed.
    """
    if limit <= 0:
        return []
    gold_hunks = [_GoldHunk.parse(piece) for piece in hunks(gold_patch)]
    count = len(gold_hunks)
    if count < 2:
        return []
    variants: list[Variant] = []
    seen: set[tuple[int, ...]] = set()
    for subset in _hunk_subsets(count, random.Random(seed)):
        if len(variants) == limit:
            break
        if subset in seen:  # with two hunks, "all but one" is the other single hunk
            continue
        seen.add(subset)
        selected = [gold_hunks[index] for index in subset]
        name, description = _subset_names(subset, count, selected)
        variants.append(Variant(kind="partial", name=name, patch=_joined_hunks(selected), description=description))
    return variants


def _hunk_subsets(count: int, rng: random.Random) -> Iterator[tuple[int, ...]]:
    """Proper non-empty subsets of ``range(count)`` (sorted tuples), in the documented order."""
    everything = range(count)
    for index in everything:
        yield (index,)
    for index in everything:
        yield tuple(other for other in everything if other != index)
    middle_sizes = range(2, count - 1)
    if count <= _ENUMERATE_SUBSETS_UP_TO:
        middles = [subset for size in middle_sizes for subset in itertools.combinations(everything, size)]
        rng.shuffle(middles)
        yield from middles
    else:
        # 2**k subsets are too many to list; a repeat is rare and the caller skips it.
        for _ in range(_SAMPLED_SUBSETS):
            yield tuple(sorted(rng.sample(everything, rng.choice(middle_sizes))))


def _subset_names(subset: tuple[int, ...], count: int, selected: Sequence[_GoldHunk]) -> tuple[str, str]:
    paths = ", ".join(dict.fromkeys(hunk.path for hunk in selected))
    if len(subset) == 1:
        number = subset[0] + 1
        return f"hunks-{number}of{count}", f"only hunk {number} of {count} ({paths})"
    if len(subset) == count - 1:
        number = next(index for index in range(count) if index not in subset) + 1
        return f"all-but-{number}of{count}", f"every hunk but {number} of {count} ({paths})"
    numbers = [str(index + 1) for index in subset]
    return f"hunks-{'+'.join(numbers)}of{count}", f"hunks {', '.join(numbers)} of {count} ({paths})"


def _joined_hunks(selected: Sequence[_GoldHunk]) -> str:
    parts: list[str] = []
    file_header: str | None = None
    offset = 0
    # Subsets keep the gold order, so the hunks of one file are adjacent.
    for hunk in selected:
        if hunk.file_header != file_header:
            file_header, offset = hunk.file_header, 0
            parts.append(hunk.file_header)
        parts.append(hunk.rendered(offset))
        offset += hunk.target_length - hunk.source_length
    return "".join(parts)


def _header_path(header_lines: Sequence[str]) -> str:
    """The file a patch's header names: ``+++ b/path``, or ``--- a/path`` for a deletion."""
    paths = {line[:4]: line[4:].rstrip("\n") for line in header_lines if line.startswith(("--- ", "+++ "))}
    path = paths.get("+++ ", "/dev/null")
    if path == "/dev/null":
        path = paths.get("--- ", path)
    return path[2:] if path[1:2] == "/" else path


# --- near misses ---------------------------------------------------------------------------

# Only modules are mutated: a stub (.pyi) never runs, so a mutated one would score like gold.
_MUTABLE_SUFFIX = ".py"
_NO_NEWLINE = "\\ No newline at end of file\n"
_SNIPPET_CHARS = 60
# How alike a removed and an added statement in different places must be to count as one moved.
_MOVED_SIMILARITY = 0.6
# Statement pairs whose similarity is computed, at most, per pairing (about a second's work).
_PAIRING_BUDGET = 20_000
_CLAUSES = (cst.Else, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally, cst.MatchCase)
_Node = TypeVar("_Node", bound=cst.CSTNode)
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


#: Makes a mutated file's text when called. Sites are many; only those drawn are built, and
#: checked (an ``ast`` parse) and diffed.
_Build = Callable[[], str]


@dataclass(frozen=True)
class _SourceFile:
    """A ``.py`` file the fix changed: both versions, parsed once."""

    path: str
    old: str  #: ``""`` for a file the fix creates
    new: str
    new_tree: str
    old_tree: str | None  #: ``None`` when the base version does not parse
    module: cst.Module
    positions: Mapping[cst.CSTNode, CodeRange]
    lines: list[str]  #: of ``new``

    @classmethod
    def parse(cls, path: str, old: str, new: str) -> _SourceFile | None:
        """Both versions parsed, or ``None`` when ``ast`` or libcst cannot read the new one."""
        new_tree = _syntax_tree(new)
        if new_tree is None:
            return None
        try:
            # The module is ours alone: the wrapper need not copy it to protect it.
            wrapper = MetadataWrapper(cst.parse_module(new), unsafe_skip_copy=True)
        except cst.ParserSyntaxError:
            return None
        positions = wrapper.resolve(PositionProvider)
        return cls(path, old, new, new_tree, _syntax_tree(old), wrapper.module, positions, _lines(new))

    def sites(self) -> Iterator[tuple[MutationKind, str, _Build]]:
        """Every place to mutate, by kind in source order: kind, description, build."""
        changed = _ChangedLines.between(self.old, self.new)
        for description, build in _undone_statements(self):
            yield "undo-statement", description, build
        for description, build in _flipped_comparisons(self, changed):
            yield "flip-compare", description, build
        for description, build in _altered_returns(self, changed):
            yield "alter-return", description, build

    def faithful(self, text: str) -> bool:
        """Whether mutated ``text`` parses and means something other than both versions."""
        tree = _syntax_tree(text)
        return tree is not None and tree != self.new_tree and text != self.old and tree != self.old_tree


@dataclass(frozen=True)
class _Site:
    """One place where one file can be mutated; ``number`` counts the sites of its kind."""

    kind: MutationKind
    number: int
    file: _SourceFile
    description: str
    build: _Build


def near_misses(
    before: Mapping[str, str], after: Mapping[str, str], *, limit: int = 6, seed: int = 0
) -> list[Variant]:
    """Up to ``limit`` variants of the fix, each broken in one place of code the fix changed.

    ``before`` holds the base-commit text of the files the gold patch touches (a file the patch
    creates is absent), ``after`` the same files with the gold patch applied (a file it deletes is
    absent). Each variant's patch turns ``before`` into ``after`` except for one ``.py`` file,
    where one mutation is made in statements or expressions on lines the fix added or rewrote:

    - ``undo-statement-N``: one changed statement goes back to its base form (a compound
      statement's header only, re-indented to its new place), one added statement is dropped
      (a compound one with its body), or one removed statement is put back;
    - ``flip-compare-N``: one comparison operator is flipped (``<``/``<=``, ``>``/``>=``,
      ``==``/``!=``, ``in``/``not in``, ``is``/``is not``);
    - ``alter-return-N``: one returned value changes (``True``/``False`` swap, a number n becomes
      n + 1, a string becomes empty, anything else becomes ``None``).

    Every mutated file parses with :func:`ast.parse`, and its syntax tree differs from both its
    ``after`` and its ``before`` form, so no variant is gold or the empty patch in disguise (a
    change to comments alone is no mutation); no two variants have the same patch. N numbers the
    sites of a kind in path then source order, so a name means the same mutation whatever the
    ``limit`` or ``seed``; a site whose mutation is not faithful leaves a gap. Kinds take turns
    (undo, flip, alter, undo ...) until ``limit`` variants are found; a kind with more sites than
    turns gives a sample drawn with ``random.Random(seed)``, so when every faithful mutation fits,
    the result is all of them, whatever the seed. The list comes round-robin, each kind in
    N order. Non-Python files (``.pyi`` stubs included) and files that libcst or :func:`ast.parse`
    cannot read are never mutated. Patches name files verbatim and give new and deleted files
    mode 100644.
    """
    if limit <= 0:
        return []
    paths = sorted(set(before) | set(after))
    sites: dict[MutationKind, list[_Site]] = {kind: [] for kind in MUTATION_KINDS}
    for path in paths:
        old, new = before.get(path), after.get(path)
        if new is None or old == new or not path.endswith(_MUTABLE_SUFFIX):
            continue
        source = _SourceFile.parse(path, old or "", new)
        if source is None:
            continue
        for kind, description, build in source.sites():
            sites[kind].append(_Site(kind, len(sites[kind]) + 1, source, description, build))

    rng = random.Random(seed)
    queues: dict[MutationKind, list[_Site]] = {}
    for kind in MUTATION_KINDS:
        # Popped from the end: a shuffled queue is a random sample, drawn only as far as needed.
        queues[kind] = list(sites[kind])
        rng.shuffle(queues[kind])
    chosen: dict[MutationKind, list[tuple[_Site, str]]] = {kind: [] for kind in MUTATION_KINDS}
    seen: set[str] = set()
    count = 0
    while count < limit and any(queues.values()):
        for kind in MUTATION_KINDS:
            if count == limit:
                break
            while queues[kind]:
                site = queues[kind].pop()
                text = site.build()
                if not site.file.faithful(text):
                    continue
                patch = _diff_files(paths, before, {**after, site.file.path: text})
                if patch not in seen:
                    seen.add(patch)
                    chosen[kind].append((site, patch))
                    count += 1
                    break
    return _interleaved(chosen)


def _interleaved(chosen: Mapping[MutationKind, list[tuple[_Site, str]]]) -> list[Variant]:
    """The chosen variants round-robin over the kinds, each kind in site order."""
    ordered = [sorted(chosen[kind], key=lambda item: item[0].number) for kind in MUTATION_KINDS]
    variants: list[Variant] = []
    for row in itertools.zip_longest(*ordered):
        for item in row:
            if item is not None:
                site, patch = item
                name = f"{site.kind}-{site.number}"
                variants.append(Variant(kind="near_miss", name=name, patch=patch, description=site.description))
    return variants


def _syntax_tree(text: str) -> str | None:
    """``ast.dump`` of ``text`` (no positions, no comments), or ``None`` when it does not parse."""
    try:
        with warnings.catch_warnings():
            # An invalid escape in the project's own strings is not our concern.
            warnings.simplefilter("ignore")
            return ast.dump(ast.parse(text))
    except (SyntaxError, ValueError, RecursionError):
        return None


@dataclass(frozen=True)
class _ChangedLines:
    """Where a fix changed a file, in the new file's 1-based line numbers."""

    lines: frozenset[int]  #: lines the fix added or rewrote
    gaps: frozenset[int]  #: g such that the fix removed lines between new lines g and g + 1

    @classmethod
    def between(cls, old: str, new: str) -> _ChangedLines:
        old_lines, new_lines = _lines(old), _lines(new)
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


def _changed_nodes(
    positions: Mapping[cst.CSTNode, CodeRange], node_type: type[_Node], changed: _ChangedLines
) -> list[_Node]:
    """The nodes of ``node_type`` on changed lines, in source order."""
    nodes = [
        (span, node) for node, span in positions.items() if isinstance(node, node_type) and changed.touch(span)
    ]
    nodes.sort(key=lambda item: (item[0].start.line, item[0].start.column, item[0].end.line, item[0].end.column))
    return [node for _, node in nodes]


def _flipped_comparisons(source: _SourceFile, changed: _ChangedLines) -> Iterator[tuple[str, _Build]]:
    for comparison in _changed_nodes(source.positions, cst.Comparison, changed):
        for target in comparison.comparisons:
            span = source.positions[target.operator]
            flipped = _FLIPPED_OPERATORS[type(target.operator)]
            operator = _shortened(source.module.code_for_node(target.operator))
            yield (
                f"flip `{operator}` to `{flipped}` on line {span.start.line} of {source.path}",
                functools.partial(_with_span_replaced, source.lines, span, flipped),
            )


def _altered_returns(source: _SourceFile, changed: _ChangedLines) -> Iterator[tuple[str, _Build]]:
    for statement in _changed_nodes(source.positions, cst.Return, changed):
        value = statement.value
        altered = None if value is None else _altered_value(value)
        if value is None or altered is None:
            continue
        # The value's span leaves out its parentheses, so "return(x)" becomes "return(None)".
        span = source.positions[value]
        yield (
            f"return `{altered}` instead of `{_snippet(source.module, value)}` "
            f"on line {span.start.line} of {source.path}",
            functools.partial(_with_span_replaced, source.lines, span, altered),
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
            return repr(ast.literal_eval(value.value) + 1)
        case cst.SimpleString():
            if value.evaluated_value in ("", b""):
                return "None"
            # Keep bytes bytes: only the content should be wrong, not the type.
            return 'b""' if "b" in value.prefix.lower() else '""'
        case cst.ConcatenatedString() | cst.FormattedString():
            return '""'
    return "None"


def _with_span_replaced(lines: list[str], span: CodeRange, replacement: str) -> str:
    """The text of ``lines`` with what ``span`` covers replaced by ``replacement``.

    A text splice, not ``Module.deep_replace``: that re-renders the whole module, which takes
    most of a second on a file of a thousand lines. libcst's columns index the line as a ``str``.
    """
    start, end = span.start, span.end
    head = "".join(lines[: start.line - 1]) + lines[start.line - 1][: start.column]
    tail = lines[end.line - 1][end.column :] + "".join(lines[end.line :])
    return head + replacement + tail


def _snippet(module: cst.Module, node: cst.CSTNode) -> str:
    return _shortened(module.code_for_node(node))


def _shortened(code: str) -> str:
    flat = " ".join(code.split())
    return flat if len(flat) <= _SNIPPET_CHARS else flat[: _SNIPPET_CHARS - 3] + "..."


# --- undoing one statement -----------------------------------------------------------------


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


def _undone_statements(source: _SourceFile) -> Iterator[tuple[str, _Build]]:
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
    old_lines = _lines(source.old)
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
                    f"drop `{_shortened(statement.key)}` (line {statement.first} of {path}), which the fix added",
                    functools.partial(_spliced, new_lines, statement.first - 1, last, []),
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
) -> tuple[str, _Build]:
    """``statement``'s own lines replaced by ``counterpart``'s, at ``statement``'s indentation."""
    block = _reindented(
        old_lines[counterpart.first - 1 : counterpart.last],
        _indentation(old_lines[counterpart.first - 1]),
        _indentation(new_lines[statement.first - 1]),
    )
    return (
        f"revert `{_shortened(statement.key)}` (line {statement.first} of {path}) to `{_shortened(counterpart.key)}`",
        functools.partial(_spliced, new_lines, statement.first - 1, statement.last, block),
    )


def _restored(
    path: str, statement: _Statement, anchor: int, old_lines: list[str], new_lines: list[str]
) -> tuple[str, _Build]:
    """The removed ``statement`` put back after new line ``anchor``.

    ``anchor`` ends the own lines of the new counterpart of the old statement just before it:
    there the removed one sat (if that statement is a compound header, it opened its body).
    """
    last = statement.end if statement.compound else statement.last
    return (
        f"restore `{_shortened(statement.key)}` (after line {anchor} of {path}), which the fix removed",
        functools.partial(_spliced, new_lines, anchor, anchor, old_lines[statement.first - 1 : last]),
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


def _spliced(lines: list[str], start: int, stop: int, block: list[str]) -> str:
    """The text of ``lines`` with ``lines[start:stop]`` replaced by ``block``."""
    # A block's last line may have been the end of a file without a final newline.
    block = [line if line.endswith("\n") else line + "\n" for line in block]
    text = "".join(lines[:start] + block + lines[stop:])
    if lines and not lines[-1].endswith("\n") and text.endswith("\n"):
        text = text[:-1]  # the file has no final newline after the fix; the variant keeps it so
    return text


# --- writing patches -----------------------------------------------------------------------


def _diff_files(paths: Sequence[str], before: Mapping[str, str], after: Mapping[str, str]) -> str:
    return "".join(_file_diff(path, before.get(path), after.get(path)) for path in paths)


def _file_diff(path: str, old: str | None, new: str | None) -> str:
    """The ``git diff`` section turning ``old`` into ``new`` (``None``: the file does not exist)."""
    if old == new:
        return ""
    parts = [f"diff --git a/{path} b/{path}\n"]
    if old is None:
        parts.append("new file mode 100644\n")
    elif new is None:
        parts.append("deleted file mode 100644\n")
    unified = difflib.unified_diff(
        _lines(old or ""),
        _lines(new or ""),
        fromfile="/dev/null" if old is None else f"a/{path}",
        tofile="/dev/null" if new is None else f"b/{path}",
        n=3,
    )
    for line in unified:
        parts.append(line if line.endswith("\n") else line + "\n" + _NO_NEWLINE)
    return "".join(parts)


def _lines(text: str) -> list[str]:
    """``text`` cut after each ``\\n`` and nowhere else (``str.splitlines`` also cuts at form
    feeds and other separators that git and libcst do not count as line ends)."""
    pieces = text.split("\n")
    lines = [piece + "\n" for piece in pieces[:-1]]
    if pieces[-1]:
        lines.append(pieces[-1])
    return lines


# --- stubs ---------------------------------------------------------------------------------

StubStyle = Literal["none", "list", "zero", "str", "raise"]

#: The body each stub style gives a function, in the order the styles are graded.
STUB_BODIES: dict[StubStyle, str] = {
    "none": "return None",
    "list": "return []",
    "zero": "return 0",
    "str": 'return ""',
    "raise": "raise NotImplementedError",
}


#: Methods Python requires to return ``None``: a value stub gives them ``return None`` instead, or
#: every object would fail to build and the stub would measure that, not the tests.
_RETURN_NONE_METHODS = frozenset({"__init__", "__post_init__", "__init_subclass__", "__set_name__", "__setattr__",
                                  "__delattr__", "__set__", "__delete__", "__setitem__", "__delitem__"})


def stubs(before: Mapping[str, str], after: Mapping[str, str], *, limit: int = len(STUB_BODIES)) -> list[Variant]:
    """Up to ``limit`` stub variants of the fix, one per style of :data:`STUB_BODIES` in its order.

    ``before`` and ``after`` are as for :func:`near_misses`. A stub variant applies the whole fix,
    then replaces the body of every function the fix changed (touched a line of, or created) in a
    ``.py`` file by one statement: ``stub-none`` returns ``None``, ``stub-list`` ``[]``,
    ``stub-zero`` ``0``, ``stub-str`` ``""`` and ``stub-raise`` raises ``NotImplementedError``. The
    stubs are made on the fixed version so that functions the fix adds exist with the fix's
    signatures: a stub that scores above the empty patch means tests that pass on a function
    which does nothing. Docstrings stay; a function nested in a changed one goes with its body;
    ``__init__`` and the other methods that must return ``None`` return ``None`` in every style
    but ``stub-raise``.
    A variant whose patch equals the gold patch or another variant's is left out; without a
    changed function the result is ``[]``.
    """
    if limit <= 0:
        return []
    paths = sorted(set(before) | set(after))
    changed_functions: dict[str, tuple[cst.Module, frozenset[cst.FunctionDef]]] = {}
    for path in paths:
        old, new = before.get(path), after.get(path)
        if new is None or old == new or not path.endswith(_MUTABLE_SUFFIX) or _syntax_tree(new) is None:
            continue
        try:
            wrapper = MetadataWrapper(cst.parse_module(new), unsafe_skip_copy=True)
        except cst.ParserSyntaxError:
            continue
        changed = _ChangedLines.between(old or "", new)
        targets = _outermost_changed_functions(wrapper.resolve(PositionProvider), changed)
        if targets:
            changed_functions[path] = (wrapper.module, targets)
    if not changed_functions:
        return []
    gold = _diff_files(paths, before, after)
    seen = {gold}
    variants: list[Variant] = []
    for style, body in STUB_BODIES.items():
        if len(variants) == limit:
            break
        stubbed = {path: module.visit(_BodyStubber(targets, body)).code
                   for path, (module, targets) in changed_functions.items()}
        patch = _diff_files(paths, before, {**after, **stubbed})
        if patch in seen:
            continue
        seen.add(patch)
        count = sum(len(targets) for _, targets in changed_functions.values())
        variants.append(Variant(kind="stub", name=f"stub-{style}", patch=patch,
                                description=f"the fix with the {count} function(s) it changed reduced to `{body}`"))
    return variants


def _outermost_changed_functions(positions: Mapping[cst.CSTNode, CodeRange],
                                 changed: _ChangedLines) -> frozenset[cst.FunctionDef]:
    """The functions whose lines the fix touched, leaving out those nested in another such one."""
    touched = [(span, node) for node, span in positions.items()
               if isinstance(node, cst.FunctionDef) and changed.touch(span)]
    return frozenset(
        node for span, node in touched
        if not any(other is not node and other_span.start.line <= span.start.line and span.end.line <= other_span.end.line
                   for other_span, other in touched)
    )


class _BodyStubber(cst.CSTTransformer):
    """Replaces the body of the ``targets`` (functions of the module visited) by ``body``, after
    the docstring when there is one."""

    def __init__(self, targets: frozenset[cst.FunctionDef], body: str) -> None:
        super().__init__()
        self.targets = targets
        self.statement = cst.parse_statement(body)
        self.returns_none = cst.parse_statement("return None") if body.startswith("return") else self.statement

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        if original_node not in self.targets:
            return updated_node
        body: list[cst.BaseStatement] = []
        docstring = original_node.get_docstring(clean=False)
        first = original_node.body.body[0] if isinstance(original_node.body, cst.IndentedBlock) else None
        if docstring is not None and first is not None:
            body.append(first)
        body.append(self.returns_none if original_node.name.value in _RETURN_NONE_METHODS else self.statement)
        return updated_node.with_changes(body=cst.IndentedBlock(body=body))
