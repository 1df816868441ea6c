"""What grading needs of a language's test runner: :class:`TestRunnerFacts`.

The grader's promise (hidden tests never in the sandbox; the runner's configuration restored or
refused; outcomes from a machine-readable report, cross-checked; anything missing counts as failed)
is the same for every language; what differs is in these facts, which a profile gives for a
task's spec (:meth:`~repo2env.languages.LanguageProfile.test_runner`):

- how test ids are written, split back to their file (``split_id``) and joined (``join_id``);
- the command that runs a list of ids with a report, and the reports it leaves (``plan``);
- how a report is read into per-test outcomes: the planned ids' (``read``), missing and unreadable
  counting as failed, or every id the reports name (``reported``: a test file run whole lists its ids);
- how the grader's canaries are written among the tests (``canary_style``, as
  :class:`repo2env.verify.canary_maker.CanaryModule` names it: ``python`` for pytest functions,
  ``describe-it`` for a runner whose tests are ``describe``/``it``/``test`` calls, '' for none), the
  tests a test patch adds whole as the language's syntax reads them (``added_tests``: what the
  grader's mirror canaries copy), and the names a test file has in scope to declare tests with
  (``test_callees``: a runner whose files import them, as vitest's, ava's, tape's and
  ``node --test``'s do; None for globals);
- every file the runner, the module loader or the package manager reads for configuration
  (``config_patterns``: restore them before the hidden tests run, or refuse a patch that changes
  them), and the manifest fields they read (``config_fields``: ``package.json``'s ``jest`` ...);
- the added code that reaches into the runner itself (``runner_pattern``).

Python's pytest path predates the seam: its reading, selection and configuration files are the
grader's own modules (:mod:`repo2env.verify.junit`, :mod:`repo2env.verify.spec`), which the
Python facts name rather than wrap (``plan``/``read``/``split_id``/... left None), because those
modules also run inside a Harbor task's verifier, with nothing of repo2env but them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from repo2env.models import FileCallees
from repo2env.outcomes import TestStatus

if TYPE_CHECKING:
    from repo2env.patches import FilePatch

#: ``plan(test_ids, report_dir)`` -> an object with ``command`` (``sh -c``) and ``reports`` (and
#: ``outcome_stream``: whether, given ``outcome_fifo=`` a grading's collector FIFO, it streams outcomes there).
PlanRun = Callable[[Sequence[str], str], Any]
#: ``read(plan, read_report)`` -> each planned id's outcome (``reported``: every id the reports name);
#: ``read_report(path)`` gives a report's text, None when it was not written.
ReadOutcomes = Callable[[Any, Callable[[str], str | None]], Mapping[str, TestStatus]]


@dataclass(frozen=True)
class AssertedLiteral:
    """A literal a test asserts an expression equal to (``expect(f(x)).toBe(LIT)``,
    ``assert.equal(f(x), LIT)`` ...): its characters ``start:end`` in the test's source, and those of
    the string and number literals the expression passes to calls (its input)."""

    value: tuple[int, int]
    arguments: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class AddedTest:
    """A test a test patch adds whole to a file (every line of it an added line), as the language's
    syntax reads it: what the grader's mirror canaries copy (:mod:`repo2env.verify.canary_maker`)."""

    __test__ = False  # not a pytest test class, despite the name

    title: str
    describes: tuple[str, ...]  #: the describe titles the patch shows around it, outermost first
    source: str  #: its whole lines as the file holds them after the patch
    title_span: tuple[int, int]  #: its title literal's characters in ``source``
    asserted: tuple[AssertedLiteral, ...]
    first_line: int  #: the index (from 0) of its first line in the file after the patch
    last_line: int
    block: tuple[int, ...]  #: equal for the tests of one block (siblings), different otherwise
    spaced: bool = False  #: a blank line separates it from the code before or after it
    callee: str = "it"  #: the name it is declared with (``it``, ``test``): in scope in its block


@dataclass(frozen=True)
class TestRunnerFacts:
    """One task's test runner, as grading and validation need it (module docstring)."""

    __test__ = False  # not a pytest test class, despite the name

    name: str
    report_format: str
    id_format: str
    config_patterns: tuple[str, ...] = ()
    config_fields: tuple[str, ...] = ()
    runner_pattern: str = ""
    directory: str = ""
    split_id: Callable[[str], tuple[str, tuple[str, ...]]] | None = None
    join_id: Callable[[str, Sequence[str]], str] | None = None
    plan: PlanRun | None = None
    read: ReadOutcomes | None = None
    reported: ReadOutcomes | None = None
    #: ``read_stream(plan, stream_text)`` -> each planned id's outcome as the live outcome stream the
    #: grading's collector read gave it (for a plan with ``outcome_stream``).
    read_stream: Callable[[Any, str], Mapping[str, TestStatus]] | None = None
    canary_style: str = ""
    #: ``added_tests(file, test_callee='')``: ``test_callee`` is the name the whole file declares
    #: tests with, when the caller read it (the patch may not show the file's imports).
    added_tests: Callable[..., list[AddedTest]] | None = None
    #: The names a test file's top level has, as the test patch shows the file (None: the runner's
    #: globals ``it`` and ``describe``, in every file). The build reads them from the whole file too
    #: (``EnvSpec.test_callees``), which the grader prefers.
    test_callees: Callable[[FilePatch], FileCallees] | None = None
    notes: Mapping[str, str] = field(default_factory=dict)
