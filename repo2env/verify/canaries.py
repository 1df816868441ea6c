"""Hidden canary tests, as one grading knows them: their ids and what each must come out as.

Code that runs inside the test process can forge outcomes (rewrite reports, swap test functions
for no-ops, return whatever the calling test expects); no static rule can prove that it does not.
Canaries make it visible: per grading, tests the grader adds to the task's own test modules, whose
outcome it knows in advance (:mod:`repo2env.verify.canary_maker` draws them). A must-fail canary
that passes, or a must-pass canary that fails, means the reports are not the tests' own.

Standard library only: a Harbor task's verifier reads a plan under the image's own Python.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Canary:
    """One hidden test: its node id, the module it is placed in, and what it must come out as
    (neither: it is only checked as a member of an exclusive group). ``placed`` is False for a
    canary the grader found nowhere to place in its module: nothing checks that module's report,
    so every grading of the task must be refused (:attr:`CanaryPlan.unplaced`)."""

    test_id: str
    path: str
    must_pass: bool = False
    must_fail: bool = False
    placed: bool = True


@dataclass(frozen=True)
class CanaryPlan:
    """The canaries of one grading, the definitions placed in each test module, and the exclusive
    groups: ids (canaries, or a task's test with its canaries) of which at most one may pass."""

    canaries: tuple[Canary, ...]
    definitions: dict[str, list]
    exclusive: tuple[tuple[str, ...], ...] = ()

    @property
    def must_fail(self) -> tuple[str, ...]:
        return tuple(canary.test_id for canary in self.canaries if canary.must_fail)

    @property
    def must_pass(self) -> tuple[str, ...]:
        return tuple(canary.test_id for canary in self.canaries if canary.must_pass)

    @property
    def unplaced(self) -> tuple[str, ...]:
        """The modules where a canary could not be placed (their reports are checked by nothing)."""
        return tuple(dict.fromkeys(canary.path for canary in self.canaries if not canary.placed))
