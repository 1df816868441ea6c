"""What of an agent's patch the grader accepts: changes to the code, never to the tests or their setup.

Dropped (and reported): files on test paths (the split's own rule), test configuration
(``conftest.py`` anywhere, ``pytest.ini``, ``.pytest.ini``, ``tox.ini``, ``setup.cfg``, ``noxfile.py``),
and files that Python or pytest load by themselves (``sitecustomize.py``, ``usercustomize.py``,
``*.pth``, ``__pycache__``/``.pyc``, and package metadata in ``*.dist-info``/``*.egg-info``, whose
``pytest11`` entry points pytest loads as plugins). ``pyproject.toml`` is kept, but its pytest
sections are restored inside the grading sandbox. Added lines that reach into the test runner
(pytest internals, its hooks, JUnit output, exiting the interpreter) are listed as ``suspicious``:
the grader scores such a patch 0 unless the task's own fix does the same (a pytest plugin's
repository, say).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from repo2env.mine.split import classify_path

# pytest reads `.pytest.ini` before pyproject.toml, so it would override the restored pytest sections.
_TEST_CONFIG_NAMES = frozenset({"conftest.py", "pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "noxfile.py",
                                "sitecustomize.py", "usercustomize.py"})
# Any `*.dist-info`/`*.egg-info` on sys.path (the repository's root, an editable install's src/) is
# package metadata to importlib, and pytest loads the plugins its entry_points.txt declares.
_METADATA_SUFFIXES = (".dist-info", ".egg-info")
_RUNNER_TAMPERING = re.compile(
    r"_pytest|pytest_(?:runtest|collect|report|configure|sessionfinish|sessionstart|unconfigure|plugin)"
    r"|junit|PYTEST_|sys\.modules\[\s*['\"]pytest|os\._exit|atexit|faulthandler|sys\.settrace|sys\.setprofile"
    r"|builtins\.__import__|__builtins__\[",
)


@dataclass(frozen=True)
class FilteredPatch:
    """The part of an agent's patch the grader applies, and what it left out."""

    patch: str
    kept_paths: tuple[str, ...]
    dropped_paths: tuple[str, ...]
    suspicious: tuple[str, ...]


def is_protected_path(path: str) -> bool:
    """Whether the grader refuses changes to ``path`` (test files and test configuration)."""
    name = PurePosixPath(path).name
    parts = PurePosixPath(path).parts
    return (classify_path(path) == "test" or name in _TEST_CONFIG_NAMES or name.endswith((".pth", ".pyc"))
            or "__pycache__" in parts or ".git" in parts or path.startswith("/") or ".." in parts
            or any(part.endswith(_METADATA_SUFFIXES) for part in parts[:-1]))


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
        if any(is_protected_path(path) for path in paths):
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

