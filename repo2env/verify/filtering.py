"""What of an agent's patch the grader accepts: changes to the code, never to the tests or their setup.

Dropped (and reported): files on test paths (the split's own rule), test configuration
(``conftest.py`` anywhere, ``pytest.toml``, ``.pytest.toml``, ``pytest.ini``, ``.pytest.ini``,
``tox.ini``, ``setup.cfg``, ``noxfile.py``), files that Python or pytest load by themselves
(``sitecustomize``/``usercustomize`` as modules or packages, ``*.pth``, ``__pycache__``/``.pyc``, and
package metadata in ``*.dist-info``/``*.egg-info``/``*.egg``, whose ``pytest11`` entry points pytest
loads as plugins), binary patches of importable files (Python sources, ``.pth``, compiled
modules), which no text check can read, submodules, and symbolic links that point outside the
repository or at a protected path. A file counts as protected when any name its header could
give it is (the names ``git apply`` reads, C-quoted or not, and every other spelling on its
lines), and a patch ``git apply`` would refuse whole is refused whole. Names compare without case: Python's metadata lookup
ignores it. ``pyproject.toml`` is kept, but its pytest sections are restored inside the grading
sandbox. Added lines that reach into the test runner (pytest internals, its hooks, JUnit output,
exiting the interpreter) are listed as ``suspicious``: the grader scores such a patch 0 unless the
task's own fix does the same (a pytest plugin's repository, say). The grading sandbox runs the same
check again on the files as they stand after applying, decoded the way Python decodes them.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from repo2env.errors import PatchError
from repo2env.languages.python.paths import PYTHON_PATHS
from repo2env.languages.python.runner import (
    IMPORTABLE_SUFFIXES,
    METADATA_SUFFIXES,
    RUNNER_PATTERN,
    STARTUP_MODULES,
    TEST_CONFIG_NAMES,
)
from repo2env.patches import SUBMODULE_MODE, FilePatch, Patch, parse, relative_symlink_target

# What pytest or Python itself load for configuration is the Python profile's to say (the grader
# grades Python tasks only for now).
_RUNNER_TAMPERING = re.compile(RUNNER_PATTERN)


@dataclass(frozen=True)
class FilteredPatch:
    """The part of an agent's patch the grader applies, and what it left out.

    ``error`` says why nothing of the patch is applied when it cannot be read as ``git apply``
    reads it (``git apply`` would refuse it whole).
    """

    patch: str
    kept_paths: tuple[str, ...]
    dropped_paths: tuple[str, ...]
    suspicious: tuple[str, ...]
    error: str | None = None


def is_protected_path(path: str) -> bool:
    """Whether the grader refuses changes to ``path`` (test files and test configuration)."""
    parts = PurePosixPath(path).parts
    lowered = tuple(part.lower() for part in parts)
    name = lowered[-1] if lowered else ""
    return (PYTHON_PATHS.classify(path) == "test" or name in TEST_CONFIG_NAMES or name.endswith((".pth", ".pyc", ".pyo"))
            or "__pycache__" in lowered or ".git" in lowered or path.startswith("/") or ".." in parts
            or any(part.split(".", 1)[0] in STARTUP_MODULES for part in lowered)
            or any(part.endswith(METADATA_SUFFIXES) for part in lowered))


def protected_path_pattern(extra: str = "") -> str:
    """:func:`is_protected_path` as one regular expression (``re.search`` on the whole path), for the
    grading script where no filter ran on the host (a Harbor task's verifier has no repo2env); with
    ``extra`` (a regular expression: a language's test paths and its runner's configuration files,
    :attr:`repo2env.verify.spec.TestRunner.protected_paths`) protected too."""
    configs = "|".join(re.escape(name) for name in sorted(TEST_CONFIG_NAMES))
    startup = "|".join(sorted(STARTUP_MODULES))
    metadata = "|".join(re.escape(suffix) for suffix in METADATA_SUFFIXES)
    return "|".join([
        PYTHON_PATHS.test_pattern(),
        rf"(?i:(?:^|/)(?:{configs})\Z)", r"(?i:\.(?:pth|pyc|pyo)\Z)", r"(?i:(?:^|/)(?:__pycache__|\.git)(?:/|\Z))",
        r"\A/", r"(?:^|/)\.\.(?:/|\Z)", rf"(?i:(?:^|/)(?:{startup})(?:\.[^/]*)?(?:/|\Z))",
        rf"(?i:(?:{metadata})(?:/|\Z))", *([extra] if extra else []),
    ])


def config_pattern(config_patterns: tuple[str, ...] | list[str]) -> str:
    """A language runner's configuration files (fnmatch patterns, ``*`` crossing ``/``) as one
    regular expression on a whole path; package.json files are left out (their runner fields are
    restored inside the grading sandbox, the rest is the fix's to change). '' for none."""
    kept = [pattern for pattern in config_patterns if not pattern.endswith("package.json")]
    if not kept:
        return ""
    return "|".join(r"\A" + fnmatch.translate(pattern).removeprefix("(?s:").removesuffix(r")\Z") + r"\Z"
                    for pattern in kept)


def filter_patch(patch: str, extra_protected: str = "") -> FilteredPatch:
    """Keep the agent's changes to non-test files; see the module docstring for the rules.

    The patch is read with :mod:`repo2env.patches`, as ``git apply`` reads it, and what is kept is
    rendered back from the same objects: the files the filter judged are the files git applies.
    """
    if not patch.strip():
        return FilteredPatch("", (), (), ())
    try:
        files = parse(patch).files
    except PatchError as error:
        return FilteredPatch("", (), (), (), error=error.message)
    kept: list[FilePatch] = []
    dropped: list[str] = []
    extra = re.compile(extra_protected) if extra_protected else None
    for file in files:
        if _refused(file) or (extra is not None and any(extra.search(name) for name in (*file.paths, *file.names))):
            dropped.extend(path for path in file.paths if path not in dropped)
        else:
            kept.append(file)
    text = "".join(file.render(trailer=False) for file in kept)
    kept_paths = tuple(dict.fromkeys(path for file in kept for path in file.paths))
    suspicious = tuple(sorted({match.group(0) for file in kept for line in file.added_lines
                               for match in _RUNNER_TAMPERING.finditer(line)}))
    return FilteredPatch(text, kept_paths, tuple(dropped), suspicious)


def runner_references(patch: str | Patch) -> set[str]:
    """The test-runner references a patch's added lines make (used on the gold patch)."""
    parsed = parse(patch) if isinstance(patch, str) else patch
    return {match.group(0) for line in parsed.added_lines for match in _RUNNER_TAMPERING.finditer(line)}


def _refused(file: FilePatch) -> bool:
    """Whether a file of the agent's patch is left out (rules: module docstring)."""
    if _protected_names(file):
        return True
    # Binary data no text check can read, in a file Python imports or executes.
    if file.is_binary and any(name.lower().endswith(IMPORTABLE_SUFFIXES) for name in (*file.paths, *file.names)):
        return True
    if file.result_mode == SUBMODULE_MODE:
        return True
    if file.is_symlink:
        # A link is kept only when it points at a path of the repository the agent may change.
        target = file.symlink_target
        resolved = relative_symlink_target(file.path, target) if target is not None else None
        return resolved is None or is_protected_path(resolved)
    return False


def _protected_names(file: FilePatch) -> list[str]:
    """The protected paths among every name any header line of ``file`` may give."""
    return [name for name in dict.fromkeys((*file.paths, *file.names)) if is_protected_path(name)]
