"""What of an agent's patch the grader accepts: changes to the code, never to the tests or their setup.

Dropped (and reported): files on test paths (the split's own rule), test configuration
(``conftest.py`` anywhere, ``pytest.toml``, ``.pytest.toml``, ``pytest.ini``, ``.pytest.ini``,
``tox.ini``, ``setup.cfg``, ``noxfile.py``), files that Python or pytest load by themselves
(``sitecustomize``/``usercustomize`` as modules or packages, ``*.pth``, ``__pycache__``/``.pyc``, and
package metadata in ``*.dist-info``/``*.egg-info``/``*.egg``, whose ``pytest11`` entry points pytest
loads as plugins), and binary patches of importable files (Python sources, ``.pth``, compiled
modules), which no text check can read. Names compare without case: Python's metadata lookup
ignores it. ``pyproject.toml`` is kept, but its pytest sections are restored inside the grading
sandbox. Added lines that reach into the test runner (pytest internals, its hooks, JUnit output,
exiting the interpreter) are listed as ``suspicious``: the grader scores such a patch 0 unless the
task's own fix does the same (a pytest plugin's repository, say). The grading sandbox runs the same
check again on the files as they stand after applying, decoded the way Python decodes them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from repo2env.mine.split import classify_path, test_path_pattern

# pytest reads `pytest.toml`, `.pytest.toml` (pytest 9) and `.pytest.ini` before pyproject.toml, so
# they would override the restored pytest sections. Compared in lower case.
_TEST_CONFIG_NAMES = frozenset({"conftest.py", "pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini", "tox.ini",
                                "setup.cfg", "noxfile.py"})
# Imported by `site` at start-up, as a module or a package of any suffix (.py, .pyc, .so, a folder).
_STARTUP_MODULES = frozenset({"sitecustomize", "usercustomize"})
# Any `*.dist-info`/`*.egg-info` on sys.path (the repository's root, an editable install's src/) is
# package metadata to importlib, whose lookup ignores case, and pytest loads the plugins its
# entry_points.txt declares; an `*.egg` folder on sys.path holds metadata too.
_METADATA_SUFFIXES = (".dist-info", ".egg-info", ".egg")
# Files Python imports or executes: a binary patch of one hides its text from every check.
_IMPORTABLE_SUFFIXES = (".py", ".pyw", ".pyi", ".pth", ".pyc", ".pyo", ".so", ".pyd", ".toml", ".ini", ".cfg", ".txt")
RUNNER_PATTERN = (
    r"_pytest|pytest_(?:runtest|collect|report|configure|sessionfinish|sessionstart|unconfigure|plugin)"
    r"|junit|PYTEST_|sys\.modules\[\s*['\"]pytest|os\._exit|atexit|faulthandler|sys\.settrace|sys\.setprofile"
    r"|builtins\.__import__|__builtins__\["
)
_RUNNER_TAMPERING = re.compile(RUNNER_PATTERN)


@dataclass(frozen=True)
class FilteredPatch:
    """The part of an agent's patch the grader applies, and what it left out."""

    patch: str
    kept_paths: tuple[str, ...]
    dropped_paths: tuple[str, ...]
    suspicious: tuple[str, ...]


def is_protected_path(path: str) -> bool:
    """Whether the grader refuses changes to ``path`` (test files and test configuration)."""
    parts = PurePosixPath(path).parts
    lowered = tuple(part.lower() for part in parts)
    name = lowered[-1] if lowered else ""
    return (classify_path(path) == "test" or name in _TEST_CONFIG_NAMES or name.endswith((".pth", ".pyc", ".pyo"))
            or "__pycache__" in lowered or ".git" in lowered or path.startswith("/") or ".." in parts
            or any(part.split(".", 1)[0] in _STARTUP_MODULES for part in lowered)
            or any(part.endswith(_METADATA_SUFFIXES) for part in lowered))


def protected_path_pattern() -> str:
    """:func:`is_protected_path` as one regular expression (``re.search`` on the whole path), for the
    grading script where no filter ran on the host (a Harbor task's verifier has no repo2env)."""
    configs = "|".join(re.escape(name) for name in sorted(_TEST_CONFIG_NAMES))
    startup = "|".join(sorted(_STARTUP_MODULES))
    metadata = "|".join(re.escape(suffix) for suffix in _METADATA_SUFFIXES)
    return "|".join([
        test_path_pattern(),
        rf"(?i:(?:^|/)(?:{configs})\Z)", r"(?i:\.(?:pth|pyc|pyo)\Z)", r"(?i:(?:^|/)(?:__pycache__|\.git)(?:/|\Z))",
        r"\A/", r"(?:^|/)\.\.(?:/|\Z)", rf"(?i:(?:^|/)(?:{startup})(?:\.[^/]*)?(?:/|\Z))",
        rf"(?i:(?:{metadata})(?:/|\Z))",
    ])


def filter_patch(patch: str) -> FilteredPatch:
    """Keep the agent's changes to non-test files; see the module docstring for the rules."""
    if not patch.strip():
        return FilteredPatch("", (), (), ())
    blocks = re.split(r"(?m)^(?=diff --git )", patch)
    kept, kept_paths, dropped = [], [], []
    for block in blocks:
        if not block.startswith("diff --git "):
            continue
        paths = _block_paths(block)
        binary_code = re.search(r"(?m)^(GIT binary patch|Binary files )", block) and any(
            path.lower().endswith(_IMPORTABLE_SUFFIXES) for path in paths)
        if binary_code or any(is_protected_path(path) for path in paths):
            dropped.extend(path for path in paths if path not in dropped)
        else:
            kept.append(block if block.endswith("\n") else block + "\n")
            kept_paths.extend(path for path in paths if path not in kept_paths)
    text = "".join(kept)
    suspicious = tuple(sorted({match.group(0) for line in _added_lines(text) for match in _RUNNER_TAMPERING.finditer(line)}))
    return FilteredPatch(text, tuple(kept_paths), tuple(dropped), suspicious)


def runner_references(patch: str) -> set[str]:
    """The test-runner references a patch's added lines make (used on the gold patch)."""
    return {match.group(0) for line in _added_lines(patch) for match in _RUNNER_TAMPERING.finditer(line)}


def patch_paths(patch: str) -> list[str]:
    """Every path a patch touches (the gold patch's new top-level modules are allowed to the agent)."""
    blocks = re.split(r"(?m)^(?=diff --git )", patch)
    return list(dict.fromkeys(path for block in blocks if block.startswith("diff --git ") for path in _block_paths(block)))


def _block_paths(block: str) -> list[str]:
    header = block.split("\n", 1)[0]
    paths = []
    match = re.match(r'^diff --git "?a/(.+?)"? "?b/(.+?)"?$', header)
    if match:
        paths.extend({match.group(1), match.group(2)})
    for line in block.split("\n@@", 1)[0].splitlines():
        for prefix in ("rename from ", "rename to ", "copy from ", "copy to ", "--- a/", "+++ b/"):
            if line.startswith(prefix):
                candidate = line[len(prefix):].strip().strip('"')
                if candidate and candidate not in paths:
                    paths.append(candidate)
    return paths or ["(unparseable header)"]


def _added_lines(patch: str) -> list[str]:
    return [line[1:] for line in patch.splitlines() if line.startswith("+") and not line.startswith("+++")]

