"""Variants of a gold patch for reference rollouts: partial fixes, near misses and stubs.

A task is validated by grading reference patches: the gold patch must score 1.0 and the empty
patch 0. The variants made here show what lies between.

- :func:`partial_fixes` keeps a proper, non-empty subset of the gold patch's hunks, to show that
  partial credit exists; :func:`hunk_drops` leaves out exactly one hunk, to find hunks that no test
  needs (validation's adequacy check).
- :func:`near_misses` applies the whole fix, then breaks it in one place with :mod:`libcst` (undo
  one changed statement, flip one comparison, alter one returned value), always in code the fix
  changed, to show that a patch which merely resembles the fix scores below it.
- :func:`stubs` applies the whole fix, then replaces the body of every function it changed with a
  trivial one (``return None``, ``return []`` ...), to show that the hidden tests check what the
  functions do, not only that they exist.

All are pure: text in, git-format patch text out; no git, no Docker. One module each
(:mod:`.partial`, :mod:`.near_miss` with its :mod:`.mutations`, :mod:`.stubs`), on a shared
:mod:`.base`.
"""

from repo2env.validate.variants.base import MutationKind, Variant, VariantKind
from repo2env.validate.variants.mutations import MUTATIONS, AlterReturn, FlipCompare, UndoStatement
from repo2env.validate.variants.near_miss import MUTATION_KINDS, near_misses
from repo2env.validate.variants.partial import dropped_hunk, hunk_drops, partial_fixes
from repo2env.validate.variants.stubs import STUB_BODIES, StubStyle, stubs

__all__ = ["MUTATIONS", "MUTATION_KINDS", "STUB_BODIES", "AlterReturn", "FlipCompare", "MutationKind", "StubStyle",
           "UndoStatement", "Variant", "VariantKind", "dropped_hunk", "hunk_drops", "near_misses", "partial_fixes",
           "stubs"]
