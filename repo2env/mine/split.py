"""Split a PR's diff into the fix (``patch``), its tests (``test_patch``) and the rest (``aux_patch``).

The diff is in git format, as ``git diff`` and GitHub's ``.diff`` produce it. It is read with
:mod:`repo2env.patches` (as ``git apply`` reads it); each part is the files' own text, rendered
back exactly, so every header git needs (``new file mode``, ``deleted file mode``, renames, mode changes, ``\\ No newline at end of
file``) survives byte for byte and each part applies with ``git apply`` on its own.

How a path is classified (:func:`classify_path`), first rule that matches wins:

1. **test** -- anything under a test tree: a directory at any depth named (any case) ``test``, ``tests``,
   ``testing``, ``testsuite``, ``__tests__``, ``test_*``/``tests-*`` or ``*_test(s)``/``*-test(s)``
   (``unit_tests/``, ``test_data/``), data and config files included (``tests/pytest.ini``,
   ``tests/data/x.json``); a file named ``test_*.py``, ``*_test.py``, ``*_tests.py``, ``tests.py``
   (Django's convention) or ``conftest.py`` anywhere, or ``test.py`` at the top level (inside a
   package, ``test.py`` is an API such as ``werkzeug.test``, the test client the package ships); ``pytest.ini`` and ``tox.ini``
   anywhere, because the grader resets those test-config files before adding the PR's tests, so a
   change to them must travel with the tests. A bare substring is never enough: ``src/_pytest/main.py``,
   ``latest/foo.py``, ``src/attestation.py``, ``contest.py``, ``pytest_plugin.py`` and a top-level
   ``testing_utils.py`` (a helper module the package ships) are all source. The price of "any
   depth": a package's own ``django/test/`` or ``numpy/testing/`` counts as test.
2. **aux** -- never a ``.py``/``.pyi`` file (code can be imported by tests, so it stays in the fix,
   even ``docs/conf.py``); otherwise prose (``*.md``, ``*.rst``, ``*.markdown``, ``*.adoc``) at any
   level, anything under ``docs/``, ``doc/``, ``changelog.d/``, ``changelog/``, ``changes/``,
   ``newsfragments/``, ``news/`` or ``release(-)notes/`` (towncrier and reno fragments), and files
   named ``CHANGES*``, ``CHANGELOG*``, ``HISTORY*``, ``NEWS*``, ``AUTHORS*``, ``CONTRIBUTORS*``,
   ``README*`` or ``RELEASE*NOTES*`` (any case) when they carry no extension or a text one
   (``.txt``, ``.md``, ``.rst`` ...), so a package's ``news.json`` stays source.
3. **source** -- everything else, including ``setup.cfg`` and ``pyproject.toml`` (mixed content).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from repo2env.patches import parse

PathKind = Literal["test", "source", "aux"]

_TEST_DIR = re.compile(
    r"(?:^|/)(?:tests?|testing|testsuite|__tests__|tests?[_-][\w.-]*|[\w.-]*[_-]tests?)/",
    re.IGNORECASE,
)
# Case-sensitive on purpose: pytest's and unittest's discovery patterns are.
_TEST_FILE = re.compile(r"test_[^/]*\.py|[^/]*_tests?\.py|tests\.py|conftest\.py")
_TEST_CONFIG_FILES = frozenset({"pytest.ini", "tox.ini"})
#: Test files that configure the test run and hold no test: a diff whose test part is only these
#: changes how tests run, not what they check (the miner does not count it as a test change).
TEST_CONFIG_FILES = _TEST_CONFIG_FILES

_AUX_DIR = re.compile(
    r"(?:^|/)(?:docs?|changelog\.d|changelog|changes|newsfragments|news|release[-_]?notes)/",
    re.IGNORECASE,
)
_AUX_NAME = re.compile(
    r"(?:changes|changelog|history|news|authors|contributors|readme|release[-_ ]?notes)(?:[._-][^/]*)?",
    re.IGNORECASE,
)
_PROSE_EXTENSIONS = frozenset({".md", ".rst", ".markdown", ".adoc"})
_TEXT_EXTENSIONS = _PROSE_EXTENSIONS | {"", ".txt"}
_PYTHON_EXTENSIONS = (".py", ".pyi")


@dataclass(frozen=True, slots=True)
class SplitDiff:
    """A PR's diff cut in three git-format patches, each applicable alone at the base commit.

    ``source_files``/``test_files``/``aux_files`` are the paths each text patch touches (the new
    path of a rename, the old path of a deletion), in the diff's order. Binary files are in no text
    patch and listed only in ``binary_files``; :func:`classify_path` tells their kind.
    ``added_lines``/``removed_lines`` count the fix (``patch``) alone, like ``touches_python``,
    which says whether the fix changes at least one ``.py``/``.pyi`` file.
    """

    patch: str
    test_patch: str
    aux_patch: str
    source_files: tuple[str, ...]
    test_files: tuple[str, ...]
    aux_files: tuple[str, ...]
    binary_files: tuple[str, ...]
    added_lines: int
    removed_lines: int
    touches_python: bool


def classify_path(path: str) -> PathKind:
    """Say whether a repository path is a test, a source or an auxiliary file (rules: module doc)."""
    if path.startswith("./"):
        path = path[2:]
    slash = path.rfind("/")
    directory, name = path[: slash + 1], path[slash + 1 :]
    if _TEST_DIR.search(directory) or _TEST_FILE.fullmatch(name) or name in _TEST_CONFIG_FILES \
            or (not directory and name == "test.py"):
        return "test"
    dot = name.rfind(".")
    extension = name[dot:].lower() if dot > 0 else ""
    if extension in _PYTHON_EXTENSIONS:
        return "source"
    if (
        extension in _PROSE_EXTENSIONS
        or _AUX_DIR.search(directory)
        or (extension in _TEXT_EXTENSIONS and _AUX_NAME.fullmatch(name))
    ):
        return "aux"
    return "source"


def test_path_pattern() -> str:
    """A regular expression that a whole path matches (``re.search``) exactly when
    :func:`classify_path` calls it a test file (for code that cannot import this module)."""
    names = "|".join(re.escape(name) for name in sorted(_TEST_CONFIG_FILES))
    return rf"(?i:{_TEST_DIR.pattern})|(?:^|/)(?:{_TEST_FILE.pattern}|{names})\Z"


def split_diff(diff_text: str) -> SplitDiff:
    """Cut a git-format diff into ``patch`` (source), ``test_patch`` and ``aux_patch``.

    Files keep the diff's order inside each part; a non-empty part ends with a newline and an
    empty part is ``""``. Binary files go to ``binary_files`` only. Text before the first file
    (a ``format-patch`` mail header) is dropped. Raises :class:`PatchError` on a malformed diff.
    """
    parts: dict[PathKind, list[str]] = {"source": [], "test": [], "aux": []}
    paths: dict[PathKind, list[str]] = {"source": [], "test": [], "aux": []}
    binary_files: list[str] = []
    added = removed = 0
    touches_python = False
    for file in parse(diff_text).files:
        if file.is_binary:
            binary_files.append(file.path)
            continue
        kind = classify_path(file.path)
        parts[kind].append(file.render())
        paths[kind].append(file.path)
        if kind == "source":
            added += file.added
            removed += file.removed
            touches_python = touches_python or any(path.endswith(_PYTHON_EXTENSIONS) for path in file.paths)
    return SplitDiff(
        patch=_joined(parts["source"]),
        test_patch=_joined(parts["test"]),
        aux_patch=_joined(parts["aux"]),
        source_files=tuple(paths["source"]),
        test_files=tuple(paths["test"]),
        aux_files=tuple(paths["aux"]),
        binary_files=tuple(binary_files),
        added_lines=added,
        removed_lines=removed,
        touches_python=touches_python,
    )


def hunks(patch: str) -> list[str]:
    """One standalone git-format patch per hunk of ``patch``, in order.

    Each carries its file's header and that single hunk, with the hunk's new-side start rewritten
    as if it were the file's only hunk, so each applies alone at the base commit; applied one
    after another they also apply, because ``git apply`` tolerates the shifted line offsets.
    Binary files and files without hunks (a pure rename or mode change) yield nothing.
    """
    return [file.with_hunks([hunk.alone().terminated()]).render() for file in parse(patch).files for hunk in file.hunks]


def added_lines(patch: str) -> list[str]:
    """The content of every line ``patch`` adds (no leading ``+``, no final ``\\n``), in order."""
    return parse(patch).added_lines


def _joined(pieces: list[str]) -> str:
    text = "".join(pieces)
    return text if not text or text.endswith("\n") else text + "\n"
