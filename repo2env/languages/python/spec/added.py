"""The requirements a PR adds to what the install reads, read from its patches.

A merged PR often adds a test dependency together with its tests (attrs 155 adds ``six`` to
dev-requirements.txt, and its new test imports it). The environment is installed at the base
commit and the sandbox has no network, so the PR's tests could not even be collected after the
fix: the build installs these requirements too (:func:`requirements_added`), after the base
commit's install, as the JavaScript profile installs what a PR adds to package.json.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from repo2env.errors import PatchError
from repo2env.languages.files import RepoFiles
from repo2env.languages.python.own_code import _distribution_name
from repo2env.languages.python.spec.files import _Project, _read_project, _valid_requirement
from repo2env.languages.python.spec.install import _test_requirement_lines, dependency_lines
from repo2env.patches import parse_readable, patched_text

#: Files that declare requirements: packaging metadata, tox, requirement files at any depth.
_DECLARES = re.compile(r"(?:^|/)(?:pyproject\.toml|setup\.py|setup\.cfg|tox\.ini)$|requirements[^/]*\.(?:txt|in)$"
                       r"|(?:^|/)requirements/[^/]+\.(?:txt|in)$")


class _Patched:
    """``files`` with the text of ``changed`` (path -> text after the PR; None: deleted) in place."""

    def __init__(self, files: RepoFiles, changed: dict[str, str | None]) -> None:
        self.files, self.changed = files, changed

    def read(self, path: str) -> str | None:
        return self.changed[path] if path in self.changed else self.files.read(path)

    def listing(self) -> list[str]:
        gone = {path for path, text in self.changed.items() if text is None}
        return sorted((set(self.files.listing()) | set(self.changed)) - gone)


def requirements_added(files: RepoFiles, patches: Sequence[str]) -> dict[str, str]:
    """The requirements the PR's ``patches`` (the gold patch, then the test patch) add to those the
    install reads, or whose specifier they change: canonical name -> the PR's requirement.

    The files the patches touch are patched as text (the hunks applied to the base commit's files)
    and the project is read on both sides as the install inference reads it: the dependencies
    (pyproject's, setup.py's and setup.cfg's), the chosen test extras, requirement files, literal
    test requirements and test dependency groups. A requirement the PR removes, the project itself,
    and lines that are no requirement by name (paths, URLs, options) are left out; so is what a
    patch that does not parse, or a file whose hunks do not apply, would add."""
    parsed = parse_readable(patches)
    changed: dict[str, str | None] = {}
    for path in sorted({path for patch in parsed for path in patch.paths if _DECLARES.search(path)}):
        try:
            changed[path] = patched_text(files.read, path, parsed)
        except PatchError:
            continue
    if not changed:
        return {}
    project = _read_project(files)
    before, after = _requirements(project), _requirements(_read_project(_Patched(files, changed)))
    own = _distribution_name(project)
    return {name: text for name, text in sorted(after.items()) if before.get(name) != text and name != own}


def _requirements(project: _Project) -> dict[str, str]:
    """The requirements by name the install reads: the dependencies and the test requirements."""
    found: dict[str, str] = {}
    for line in [*dependency_lines(project), *_test_requirement_lines(project)]:
        if isinstance(line, str) and (text := _valid_requirement(line)) is not None:
            found.setdefault(str(canonicalize_name(Requirement(text).name)), text)
    return found
