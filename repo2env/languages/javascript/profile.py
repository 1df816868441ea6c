"""The JavaScript/TypeScript profile: npm, yarn or pnpm projects tested with jest, vitest, mocha,
ava, tape or ``node --test``."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence

from repo2env.languages.base import LanguageProfile, PathRules, VersionSources
from repo2env.languages.build import BuildRecipe
from repo2env.languages.files import RepoFiles
from repo2env.languages.interface import InterfaceNeed
from repo2env.languages.javascript.paths import javascript_paths
from repo2env.languages.javascript.runners import RUNNERS, visible_tests_command
from repo2env.languages.runner import TestRunnerFacts
from repo2env.languages.variants import VariantMaker
from repo2env.models import EnvSpec


def version_from_package_json(path: str, text: str) -> str | None:
    """The ``version`` a ``package.json`` states (None when it states none, or a placeholder such
    as semantic-release's ``0.0.0-development``)."""
    try:
        package = json.loads(text)
    except ValueError:
        return None
    version = package.get("version") if isinstance(package, dict) else None
    if not isinstance(version, str) or not re.match(r"v?\d", version) or "development" in version:
        return None
    return version


JAVASCRIPT_VERSION_SOURCES = VersionSources(files=("package.json",), package_files=(), parse=version_from_package_json)


class JavaScriptProfile(LanguageProfile):
    """JavaScript and TypeScript: a ``package.json`` project, its tests by the conventions of
    :mod:`repo2env.languages.javascript.paths` and its runner's configuration."""

    name = "javascript"
    title = "JavaScript"
    gradable = True
    version_sources = JAVASCRIPT_VERSION_SOURCES
    project_files = "package.json at the root or above the changed files"

    def ungradable_reason(self, test_runner: str | None) -> str | None:
        if test_runner in RUNNERS:
            return None
        # Without a runner we know, there is no plan to run the tests and no canary style to check
        # its reports with: no reward rather than a reward a policy can forge.
        return (f"the grader has no adapter for the test runner {test_runner!r} (known: {', '.join(RUNNERS)})"
                if test_runner else "the task names no test runner")

    def path_rules(self, files: RepoFiles | None = None) -> PathRules:
        return javascript_paths(files)

    def uses_repository(self, files: RepoFiles, touched: Sequence[str]) -> bool:
        return any(files.read(f"{folder}package.json") is not None for folder in _folders_above(touched))

    def build_recipe(self) -> BuildRecipe:
        from repo2env.languages.javascript.build import JavaScriptBuild

        return JavaScriptBuild()

    def test_runner(self, spec: EnvSpec | None = None, files: RepoFiles | None = None) -> TestRunnerFacts:
        from repo2env.languages.javascript.runner import javascript_facts

        if spec is None:
            raise ValueError("a JavaScript task's runner is its built spec's (EnvSpec.test_runner)")
        return javascript_facts(spec, files)

    def tests_reading_data(self, test_paths: Sequence[str], files: RepoFiles, spec: EnvSpec | None = None) -> list[str]:
        from repo2env.languages.javascript.data_tests import data_files, tests_reading_data

        data = data_files(test_paths)
        if not data or spec is None or not spec.test_runner:
            return []
        return tests_reading_data(data, files, spec.test_runner, spec.package_dir or "")

    def visible_tests_command(self, spec: EnvSpec | None = None) -> str:
        if spec is None or not spec.test_runner:
            raise ValueError("a JavaScript task's tests run with its built spec's runner (EnvSpec.test_runner)")
        return visible_tests_command(spec.test_runner, directory=spec.package_dir or "")

    def variants(self) -> VariantMaker:
        from repo2env.languages.javascript.variants import JavaScriptVariants  # tree-sitter

        return JavaScriptVariants()

    def introduced_interface(self, *, files_before: Mapping[str, str], files_after: Mapping[str, str],
                             test_files: Mapping[str, str], tests: Iterable[str],
                             statement: str) -> list[InterfaceNeed]:
        from repo2env.languages.javascript.interface import introduced_interface  # tree-sitter

        return introduced_interface(files_before=files_before, files_after=files_after, test_files=test_files,
                                    tests=tests, statement=statement)


def _folders_above(paths: Sequence[str]) -> list[str]:
    """The root (``""``) and every folder above ``paths`` (``"a/"``, ``"a/b/"``), nearest the root first."""
    folders = {""}
    for path in paths:
        parts = path.split("/")[:-1]
        folders.update("/".join(parts[:depth]) + "/" for depth in range(1, len(parts) + 1))
    return sorted(folders, key=lambda folder: (folder.count("/"), folder))
