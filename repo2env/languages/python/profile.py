"""The Python profile: pytest suites of packages installed in editable mode with pip or uv."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from repo2env.languages.base import LanguageProfile, PathRules
from repo2env.languages.build import BuildRecipe
from repo2env.languages.files import RepoFiles
from repo2env.languages.interface import InterfaceNeed
from repo2env.languages.python.paths import PYTHON_PATHS
from repo2env.languages.python.runner import VISIBLE_TESTS_COMMAND, pytest_facts
from repo2env.languages.python.versions import PYTHON_VERSION_SOURCES, scm_version_from_describe
from repo2env.languages.runner import TestRunnerFacts
from repo2env.languages.variants import VariantMaker
from repo2env.models import EnvSpec


class PythonProfile(LanguageProfile):
    """Python: tests and docs by the conventions of :mod:`repo2env.languages.python.paths`, the
    environment from the packaging files (:mod:`repo2env.languages.python.spec`), pytest."""

    name = "python"
    title = "Python"
    version_sources = PYTHON_VERSION_SOURCES
    gradable = True

    def path_rules(self, files: RepoFiles | None = None) -> PathRules:
        # pytest finds tests by file name wherever they are: no configuration changes what a test is.
        return PYTHON_PATHS

    def uses_repository(self, files: RepoFiles, touched: Sequence[str]) -> bool:
        # A change to a .py file is Python's to test: pytest needs no project file to run it.
        return True

    def scm_version(self, described: str) -> str:
        return scm_version_from_describe(described)

    def release_version(self, described: str) -> str:
        return scm_version_from_describe(described)

    def build_recipe(self) -> BuildRecipe:
        from repo2env.languages.python.build import PythonBuild  # packaging, yaml, the spec's tables

        return PythonBuild()

    def test_runner(self, spec: EnvSpec | None = None, files: RepoFiles | None = None) -> TestRunnerFacts:
        return pytest_facts()

    def runs_tests_as_pytest(self) -> bool:
        return True

    def visible_tests_command(self, spec: EnvSpec | None = None) -> str:
        return VISIBLE_TESTS_COMMAND

    def variants(self) -> VariantMaker:
        from repo2env.languages.python.variants import PythonVariants  # libcst

        return PythonVariants()

    def introduced_interface(self, *, files_before: Mapping[str, str], files_after: Mapping[str, str],
                             test_files: Mapping[str, str], tests: Iterable[str],
                             statement: str) -> list[InterfaceNeed]:
        from repo2env.languages.python_interface import introduced_interface  # libcst

        return introduced_interface(files_before=files_before, files_after=files_after, test_files=test_files,
                                    tests=tests, statement=statement)
