"""Variants of a gold patch for reference rollouts, as every language makes them: the
:class:`Variant` record, the :class:`VariantMaker` a profile gives (:meth:`LanguageProfile.variants`),
and partial fixes (:func:`partial_fixes`), which need no parser of the language.

A task is validated by grading reference patches: the gold patch must score 1.0 and the empty
patch 0; the variants show what lies between. Partial fixes are proper, non-empty subsets of the
gold patch's hunks, each a patch that applies at the base commit, read and written with
:mod:`repo2env.patches` (the gold patch is parsed once and each variant is rendered from its hunks,
never re-parsed). Near misses (the whole fix broken in one place) and stubs (the changed functions
given trivial bodies) need the language's syntax tree: the Python profile makes them with libcst
(:mod:`repo2env.languages.python.variants`); a profile without a parser makes none.
"""

from __future__ import annotations

import difflib
import itertools
import random
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from repo2env.patches import FilePatch, Hunk, parse

VariantKind = Literal["partial", "near_miss", "stub"]


@dataclass(frozen=True)
class Variant:
    """A patch to grade next to the gold one.

    ``kind`` is ``"partial"`` (a proper subset of the gold hunks), ``"near_miss"`` (the whole fix,
    mutated in one place) or ``"stub"``. ``name`` is unique among one call's variants and names the
    same variant whatever the ``limit`` (``hunks-1of3``, ``all-but-2of3``, ``flip-compare-1``).
    ``patch`` is a git-format diff that ``git apply`` accepts at the base commit; ``description``
    says in one sentence what the variant keeps or breaks.
    """

    kind: VariantKind
    name: str
    patch: str
    description: str


class VariantMaker:
    """A language's variant makers: partial fixes for every language; near misses and stubs from
    the files the fix changed (path -> text before and after), none without a parser of the language."""

    def partial_fixes(self, gold_patch: str, *, limit: int = 6) -> list[Variant]:
        """See :func:`partial_fixes`."""
        return partial_fixes(gold_patch, limit=limit)

    def hunk_drops(self, gold_patch: str, *, limit: int = 8, skip: Collection[str] = ()) -> list[Variant]:
        """See :func:`hunk_drops`."""
        return hunk_drops(gold_patch, limit=limit, skip=skip)

    def near_misses(self, before: Mapping[str, str], after: Mapping[str, str], *, limit: int = 6) -> list[Variant]:
        """The whole fix, broken in one place each."""
        return []

    def stubs(self, before: Mapping[str, str], after: Mapping[str, str], *, limit: int = 6) -> list[Variant]:
        """The whole fix with the bodies of the functions it changed made trivial."""
        return []


# Up to this many hunks every middle-sized subset is listed and shuffled; beyond, they are sampled.
_ENUMERATE_SUBSETS_UP_TO = 12
_SAMPLED_SUBSETS = 1000


@dataclass(frozen=True)
class _GoldHunk:
    """One hunk of the gold patch, with the file it belongs to (``file_number``: its place in the patch)."""

    file_number: int
    file: FilePatch
    hunk: Hunk


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
    gold_hunks = [_GoldHunk(number, file, hunk) for number, file in enumerate(parse(gold_patch).files)
                  if not file.is_binary for hunk in file.hunks]
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


def hunk_drops(gold_patch: str, *, limit: int = 8, seed: int = 0, skip: Collection[str] = ()) -> list[Variant]:
    """Up to ``limit`` patches that are the gold patch minus one of its hunks, whose names are not in
    ``skip`` (the partial fixes already planned: with two hunks, "all but one" is a single hunk).

    Named as :func:`partial_fixes` names the same subset (``all-but-2of3``; with two hunks
    ``hunks-2of2``), so :func:`dropped_hunk` reads either back. The hunks are taken in an order
    drawn from ``random.Random(seed)``; a smaller ``limit`` gives a prefix. ``[]`` for a patch
    with fewer than two hunks. A drop that still earns the full reward is a hunk no test needs.
    """
    gold_hunks = [_GoldHunk(number, file, hunk) for number, file in enumerate(parse(gold_patch).files)
                  if not file.is_binary for hunk in file.hunks]
    count = len(gold_hunks)
    if count < 2 or limit <= 0:
        return []
    order = list(range(count))
    random.Random(seed).shuffle(order)
    variants: list[Variant] = []
    for dropped in order:
        subset = tuple(index for index in range(count) if index != dropped)
        selected = [gold_hunks[index] for index in subset]
        name, description = _subset_names(subset, count, selected)
        if name in skip:
            continue
        if len(variants) == limit:
            break
        variants.append(Variant(kind="partial", name=name, patch=_joined_hunks(selected), description=description))
    return variants


_SUBSET_NAME = re.compile(r"hunks-(?P<kept>\d+(?:\+\d+)*)of(?P<count>\d+)|all-but-(?P<dropped>\d+)of(?P<of>\d+)")


def dropped_hunk(name: str) -> tuple[int, int] | None:
    """(the 1-based hunk left out, the gold patch's hunk count) when the partial fix named ``name``
    is the gold patch minus exactly one hunk; None for any other name."""
    match = _SUBSET_NAME.fullmatch(name)
    if match is None:
        return None
    if match.group("dropped"):
        return int(match.group("dropped")), int(match.group("of"))
    count = int(match.group("count"))
    kept = {int(number) for number in match.group("kept").split("+")}
    missing = set(range(1, count + 1)) - kept
    return (missing.pop(), count) if len(kept) == count - 1 and len(missing) == 1 else None


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
    paths = ", ".join(dict.fromkeys(hunk.file.path for hunk in selected))
    if len(subset) == 1:
        number = subset[0] + 1
        return f"hunks-{number}of{count}", f"only hunk {number} of {count} ({paths})"
    if len(subset) == count - 1:
        number = next(index for index in range(count) if index not in subset) + 1
        return f"all-but-{number}of{count}", f"every hunk but {number} of {count} ({paths})"
    numbers = [str(index + 1) for index in subset]
    return f"hunks-{'+'.join(numbers)}of{count}", f"hunks {', '.join(numbers)} of {count} ({paths})"


def _joined_hunks(selected: Sequence[_GoldHunk]) -> str:
    """The selected hunks as one patch: the hunks of one file under its header once, each
    renumbered on its new side by the net lines the file's earlier selected hunks add."""
    parts: list[str] = []
    # Subsets keep the gold order, so the hunks of one file are adjacent.
    for _, group in itertools.groupby(selected, key=lambda gold: gold.file_number):
        members = list(group)
        renumbered: list[Hunk] = []
        offset = 0
        for gold in members:
            renumbered.append(gold.hunk.alone(offset).terminated())
            offset += gold.hunk.target_length - gold.hunk.source_length
        parts.append(members[0].file.with_hunks(renumbered).render())
    return "".join(parts)


_NO_NEWLINE = "\\ No newline at end of file\n"


def diff_files(paths: Sequence[str], before: Mapping[str, str], after: Mapping[str, str]) -> str:
    return "".join(file_diff(path, before.get(path), after.get(path)) for path in paths)


def file_diff(path: str, old: str | None, new: str | None) -> str:
    """The ``git diff`` section turning ``old`` into ``new`` (``None``: the file does not exist)."""
    if old == new:
        return ""
    parts = [f"diff --git a/{path} b/{path}\n"]
    if old is None:
        parts.append("new file mode 100644\n")
    elif new is None:
        parts.append("deleted file mode 100644\n")
    unified = difflib.unified_diff(
        text_lines(old or ""),
        text_lines(new or ""),
        fromfile="/dev/null" if old is None else f"a/{path}",
        tofile="/dev/null" if new is None else f"b/{path}",
        n=3,
    )
    for line in unified:
        parts.append(line if line.endswith("\n") else line + "\n" + _NO_NEWLINE)
    return "".join(parts)


def text_lines(text: str) -> list[str]:
    """``text`` cut after each ``\\n`` and nowhere else (``str.splitlines`` also cuts at form
    feeds and other separators that git and libcst do not count as line ends)."""
    pieces = text.split("\n")
    lines = [piece + "\n" for piece in pieces[:-1]]
    if pieces[-1]:
        lines.append(pieces[-1])
    return lines
