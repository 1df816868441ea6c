"""What a language profile answers: the one interface every stage asks instead of branching on a language.

A profile (one folder under ``repo2env/languages/``, registered by name in
:mod:`repo2env.languages`) knows a language's conventions:

- **mining** -- which paths of a change are tests, test configuration, docs or source
  (:meth:`LanguageProfile.path_rules`, which may read the runner's configuration at the commit),
  whether a repository at a commit uses the language (:meth:`LanguageProfile.uses_repository`),
  where the project's version is written (:attr:`LanguageProfile.version_sources`);
- **environment** -- how to infer and install the environment (:meth:`LanguageProfile.infer_env_spec`,
  :meth:`LanguageProfile.install_ladder`), what decides the installed dependencies
  (:meth:`LanguageProfile.dependency_fingerprint`), the layers' recipes and how to prove the project's
  own code is what runs (:mod:`repo2env.languages.build`);
- **testing** -- the runner, how a list of test ids is run and its per-test outcomes read, how ids
  are written, and which files the grader must restore (:meth:`LanguageProfile.test_runner`);
  whether that is the grader's own pytest path (:meth:`LanguageProfile.runs_tests_as_pytest`); what
  the agent's ``run_tests`` tool runs (:meth:`LanguageProfile.visible_tests_command`).

Profiles are pure: they read a repository through :class:`~repo2env.languages.files.RepoFiles` and
return values; git, Docker and the network stay in the stages.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal

from repo2env.languages.files import RepoFiles

if TYPE_CHECKING:
    from repo2env.languages.build import BuildRecipe
    from repo2env.languages.interface import InterfaceNeed
    from repo2env.languages.runner import TestRunnerFacts
    from repo2env.languages.variants import VariantMaker
    from repo2env.models import EnvSpec

PathKind = Literal["test", "source", "aux"]

_DESCRIBED_TAG = re.compile(r"^(?:[\w@/.-]*?[-@/])?v?(?P<version>\d+(?:\.\d+){0,2})[^\s]*-\d+-g[0-9a-f]+$")


class PathRules(ABC):
    """How one language's conventions classify the paths of a repository (at one commit)."""

    #: Suffixes of the language's code files (``.py``, ``.pyi``): a change that touches none of
    #: them in its source part is no change of this language's code.
    code_suffixes: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def classify(self, path: str) -> PathKind:
        """Whether ``path`` is a test (test code, data and test configuration), an auxiliary file
        (docs, changelogs: needed by neither the agent nor the verifier) or source."""

    @abstractmethod
    def is_test_config(self, path: str) -> bool:
        """Whether ``path`` configures how tests run and holds no test (``tox.ini``,
        ``jest.config.js``): a change whose test part is only these checks nothing new."""

    @abstractmethod
    def test_pattern(self) -> str:
        """A regular expression a whole path matches (``re.search``) exactly when :meth:`classify`
        calls it a test, for code that cannot import the profile (a grading script)."""

    def is_type_test(self, path: str) -> bool:
        """Whether ``path`` only checks types, which a type checker reads and no test runner runs
        (tsd's ``*.test-d.ts``): a change whose tests are only these (and test configuration) has no
        test that can fail before the fix. None by default."""
        return False

    def is_code(self, path: str) -> bool:
        """Whether ``path`` is a code file of the language (by its suffix, as written)."""
        return path.endswith(self.code_suffixes)


@dataclass(frozen=True)
class VersionSources:
    """Where a project writes its version, so that mining can group tasks by X.Y as SWE-bench does.

    ``files`` are read at the repository root in order; when none says, ``package_files`` are
    looked for in the top-level folders (and ``src/``'s folders) that are not tests or docs.
    ``parse(path, text)`` returns the version a file states, or None.
    """

    files: tuple[str, ...]
    package_files: tuple[str, ...]
    parse: Callable[[str, str], str | None]


class LanguageProfile(ABC):
    """One language's answers to the stages (see the module docstring). Subclasses are stateless:
    the registry makes one instance per process."""

    #: The registry name, stored in ``Task.language`` (``"python"``).
    name: ClassVar[str]
    #: How people write it (``"Python"``), for messages and dataset cards.
    title: ClassVar[str]
    version_sources: ClassVar[VersionSources]
    #: Whether the grader grades this language's tasks (validation rejects a built task of another
    #: as ``ungradable_language`` rather than grade it as something it is not).
    gradable: ClassVar[bool] = False
    #: What :meth:`uses_repository` looks for, as a rejection names it ("package.json at the root
    #: or above the changed files").
    project_files: ClassVar[str] = "project file of the language"

    def ungradable_reason(self, test_runner: str | None) -> str | None:
        """Why the grader cannot grade, safely, a task of this language whose tests run with
        ``test_runner`` (the built EnvSpec's); None when it can. Validation rejects such a task as
        ``ungradable_language`` with this reason rather than publish a reward that can be forged."""
        return None if self.gradable else f"the grader does not grade {self.title} tasks yet"

    # --- mining -----------------------------------------------------------------------------

    @abstractmethod
    def path_rules(self, files: RepoFiles | None = None) -> PathRules:
        """The path rules for a repository at one commit. ``files`` lets a profile read the test
        runner's configuration (a ``jest.config.js`` naming its test folders); without it, the
        language's conventions alone."""

    @abstractmethod
    def uses_repository(self, files: RepoFiles, touched: Sequence[str]) -> bool:
        """Whether the repository at this commit is a project of this language for a change that
        touches ``touched`` (e.g. a ``package.json`` at the root or above one of them): only then
        can this profile build and test it."""

    def scm_version(self, described: str) -> str:
        """The version the language's build tools derive from ``git describe --tags --long``
        output, which the build hands them because the snapshot has no tags ('' when the
        language's tools derive none from version control)."""
        return ""

    def release_version(self, described: str) -> str:
        """The version a task is grouped by when no project file states one, from ``git describe
        --tags --long`` output: by default the nearest version tag's (``v1.11.13-5-gabc`` ->
        ``1.11.13``), '' without one."""
        match = _DESCRIBED_TAG.match(described.strip())
        return match.group("version") if match else ""

    # --- environment and build --------------------------------------------------------------

    @abstractmethod
    def build_recipe(self) -> BuildRecipe:
        """How this language's environments are inferred, installed, layered and checked
        (:class:`repo2env.languages.build.BuildRecipe`)."""

    # --- testing ------------------------------------------------------------------------------

    @abstractmethod
    def test_runner(self, spec: EnvSpec | None = None, files: RepoFiles | None = None) -> TestRunnerFacts:
        """What grading needs of the runner of a task built with ``spec`` (the repository at its base
        commit in ``files``, when given): :class:`repo2env.languages.runner.TestRunnerFacts`."""

    def runs_tests_as_pytest(self) -> bool:
        """Whether the stages run this language's tests as pytest, by the grader's own modules
        (selection, configuration and JUnit reading in :mod:`repo2env.verify.junit`, the run in
        ``verify/scripts/run_tests.sh``, the outcome stream of the grader's plugin), which also run
        in a Harbor verifier without any profile. Otherwise derivation and grading run the plan and
        read the reports that :meth:`test_runner`'s facts give."""
        return False

    def tests_reading_data(self, test_paths: Sequence[str], files: RepoFiles, spec: EnvSpec | None = None) -> list[str]:
        """The test files, beyond a change's own, whose tests the change's test data feeds: of
        ``test_paths`` (the change's tests, as paths) those that are data, no code, read by test
        files of ``files`` (the repository with the change's tests) that make tests of them (marked's
        ``test/specs/new/*.md``, run by ``test/specs/run-spec.js``). Derivation and the build's check
        run them as they run the change's own test files. None by default."""
        return []

    @abstractmethod
    def visible_tests_command(self, spec: EnvSpec | None = None) -> str:
        """The shell command the agent's ``run_tests`` tool runs in ``/testbed`` for a task built with
        ``spec``: the task's runner over its visible tests, stopping at the first failure where the
        runner can; the tool appends the targets (test files or folders, as absolute paths), and none
        runs the whole visible suite."""

    @abstractmethod
    def variants(self) -> VariantMaker:
        """How validation's reference variants of a gold patch are made in this language (partial
        fixes, near misses, stubs): :class:`repo2env.languages.variants.VariantMaker`."""

    # --- quality ------------------------------------------------------------------------------

    def introduced_interface(self, *, files_before: Mapping[str, str], files_after: Mapping[str, str],
                             test_files: Mapping[str, str], tests: Iterable[str],
                             statement: str) -> list[InterfaceNeed]:
        """The names the gold patch introduces that ``tests`` use and ``statement`` never names, each
        with its signature (never a body, never a default value): what validation's Interface
        section gives (docs/quality.md). ``files_before`` / ``files_after``: the fix's source files
        before and after it (a file missing before is new); ``test_files``: the test files after the
        test patch; ``tests``: FAIL_TO_PASS ids. By default nothing: a profile without a parser
        finds no interface, and its tasks are measured on everything else."""
        return []
