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

All are pure: text in, git-format patch text out; no git, no Docker. One module each
(:mod:`repo2env.languages.variants` for partial fixes, every language's; :mod:`.near_miss` with its
:mod:`.mutations`, :mod:`.stubs`), on a shared :mod:`.base`. :class:`PythonVariants` is the Python
profile's :class:`~repo2env.languages.variants.VariantMaker`.
"""

from collections.abc import Mapping

from repo2env.languages.python.variants.base import MutationKind
from repo2env.languages.python.variants.mutations import MUTATIONS, AlterReturn, FlipCompare, UndoStatement
from repo2env.languages.python.variants.near_miss import MUTATION_KINDS, near_misses
from repo2env.languages.python.variants.stubs import STUB_BODIES, StubStyle, stubs
from repo2env.languages.variants import (
    Variant,
    VariantKind,
    VariantMaker,
    dropped_hunk,
    hunk_drops,
    partial_fixes,
)


class PythonVariants(VariantMaker):
    """Partial fixes, and near misses and stubs of the changed ``.py`` files made with libcst."""

    def near_misses(self, before: Mapping[str, str], after: Mapping[str, str], *, limit: int = 6) -> list[Variant]:
        return near_misses(before, after, limit=limit)

    def stubs(self, before: Mapping[str, str], after: Mapping[str, str], *,
              limit: int = len(STUB_BODIES)) -> list[Variant]:
        return stubs(before, after, limit=limit)


__all__ = ["PythonVariants", "VariantMaker", "MUTATIONS", "MUTATION_KINDS", "STUB_BODIES", "AlterReturn", "FlipCompare", "MutationKind", "StubStyle",
           "UndoStatement", "Variant", "VariantKind", "dropped_hunk", "hunk_drops", "near_misses", "partial_fixes", "stubs"]
