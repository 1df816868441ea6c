"""Near misses: the whole fix, broken in one place of code it changed, by one of the
:data:`~repo2env.languages.python.variants.mutations.MUTATIONS`."""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping
from dataclasses import dataclass

from repo2env.languages.python.variants.base import (
    MUTABLE_SUFFIX,
    Build,
    MutationKind,
    SourceFile,
    Variant,
    diff_files,
)
from repo2env.languages.python.variants.mutations import MUTATIONS

#: Round-robin order of the near-miss kinds.
MUTATION_KINDS: tuple[MutationKind, ...] = tuple(mutation.kind for mutation in MUTATIONS)


@dataclass(frozen=True)
class _Site:
    """One place where one file can be mutated; ``number`` counts the sites of its kind."""

    kind: MutationKind
    number: int
    file: SourceFile
    description: str
    build: Build


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
        if new is None or old == new or not path.endswith(MUTABLE_SUFFIX):
            continue
        source = SourceFile.parse(path, old or "", new)
        if source is None:
            continue
        for mutation in MUTATIONS:
            for description, build in mutation.sites(source):
                sites[mutation.kind].append(_Site(mutation.kind, len(sites[mutation.kind]) + 1, source, description, build))

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
                patch = diff_files(paths, before, {**after, site.file.path: text})
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
