"""Split a PR's diff into the fix (``patch``), its tests (``test_patch``) and the rest (``aux_patch``).

The diff is in git format, as ``git diff`` and GitHub's ``.diff`` produce it. Parsing is left to
:mod:`unidiff`; each part is then cut from the diff's own lines, file by file, so every header git
needs (``new file mode``, ``deleted file mode``, renames, mode changes, ``\\ No newline at end of
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

import io
import re
from dataclasses import dataclass
from typing import Literal

from unidiff import Hunk, PatchedFile, PatchSet, UnidiffParseError
from unidiff.constants import LINE_TYPE_EMPTY

from repo2env.errors import PatchError

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
_DEV_NULL = "/dev/null"


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


def split_diff(diff_text: str) -> SplitDiff:
    """Cut a git-format diff into ``patch`` (source), ``test_patch`` and ``aux_patch``.

    Files keep the diff's order inside each part; a non-empty part ends with a newline and an
    empty part is ``""``. Binary files go to ``binary_files`` only. Text before the first file
    (a ``format-patch`` mail header) is dropped. Raises :class:`PatchError` on a malformed diff.
    """
    lines = io.StringIO(diff_text).readlines()
    parts: dict[PathKind, list[str]] = {"source": [], "test": [], "aux": []}
    paths: dict[PathKind, list[str]] = {"source": [], "test": [], "aux": []}
    binary_files: list[str] = []
    added = removed = 0
    touches_python = False
    for patched_file, start, end in _file_spans(lines):
        path = _new_path(patched_file)
        if patched_file.is_binary_file:
            binary_files.append(path)
            continue
        kind = classify_path(path)
        parts[kind].extend(lines[start:end])
        paths[kind].append(path)
        if kind == "source":
            added += patched_file.added
            removed += patched_file.removed
            touches_python = touches_python or path.endswith(_PYTHON_EXTENSIONS) or (
                _old_path(patched_file).endswith(_PYTHON_EXTENSIONS)
            )
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
    lines = io.StringIO(patch).readlines()
    pieces: list[str] = []
    for patched_file in _parse(lines, metadata_only=False):
        if patched_file.is_binary_file or not patched_file:
            continue
        # diff_line_no is 1-based and the first hunk's header sits just above its first line.
        header = "".join(lines[_first_line_index(patched_file, lines) : patched_file[0][0].diff_line_no - 2])
        for hunk in patched_file:
            body = "".join(str(line) for line in hunk if line.line_type != LINE_TYPE_EMPTY)
            if not body.endswith("\n"):
                body += "\n"
            pieces.append(header + _standalone_hunk_header(hunk) + body)
    return pieces


def added_lines(patch: str) -> list[str]:
    """The content of every line ``patch`` adds (no leading ``+``, no final ``\\n``), in order."""
    lines = io.StringIO(patch).readlines()
    added: list[str] = []
    for patched_file, start, end in _file_spans(lines):
        if patched_file.is_binary_file:
            continue
        in_hunks = False
        # unidiff has checked every hunk's line counts, so past a file's first "@@" header only
        # hunk headers and bodies follow, and a line starting with "+" is an added line.
        for line in lines[start:end]:
            if in_hunks:
                if line.startswith("+"):
                    added.append(line[1:-1] if line.endswith("\n") else line[1:])
            elif line.startswith("@@ "):
                in_hunks = True
    return added


def _file_spans(lines: list[str]) -> list[tuple[PatchedFile, int, int]]:
    """Each file of the diff with the ``[start, end)`` range of ``lines`` it covers."""
    # Hunk contents are not needed, only counts and where each file starts: metadata-only parsing
    # still checks every hunk's line counts and is several times faster.
    patched_files = _parse(lines, metadata_only=True)
    starts = [_first_line_index(patched_file, lines) for patched_file in patched_files]
    ends = starts[1:] + [len(lines)]
    return [(patched_file, starts[index], ends[index]) for index, patched_file in enumerate(patched_files)]


def _parse(lines: list[str], *, metadata_only: bool) -> PatchSet:
    try:
        return PatchSet(lines, metadata_only=metadata_only)
    except UnidiffParseError as error:
        raise PatchError(
            f"cannot parse the diff: {error}", hint="expected a git-format diff such as `git diff` prints"
        ) from error


def _first_line_index(patched_file: PatchedFile, lines: list[str]) -> int:
    index = patched_file.diff_line_no - 1
    # Without a "diff --git" header unidiff starts the file at its "+++" line; the "---" above
    # belongs to it too.
    if index > 0 and lines[index].startswith("+++ "):
        index -= 1
    return index


def _standalone_hunk_header(hunk: Hunk) -> str:
    source_start, source_length, target_length = hunk.source_start, hunk.source_length, hunk.target_length
    # Alone in its patch, nothing above the hunk shifts it: its new side starts where its old side
    # does, except that an empty side is numbered by the line before it.
    if source_length == 0:
        target_start = source_start + 1
    elif target_length == 0:
        target_start = source_start - 1
    else:
        target_start = source_start
    section = f" {hunk.section_header}" if hunk.section_header else ""
    return f"@@ -{source_start},{source_length} +{target_start},{target_length} @@{section}\n"


def _new_path(patched_file: PatchedFile) -> str:
    return _unquote(patched_file.path)


def _old_path(patched_file: PatchedFile) -> str:
    source = patched_file.source_file
    if not source or source == _DEV_NULL:
        return ""
    source = _unquote(source)
    return source[2:] if source[1:2] == "/" else source


def _unquote(path: str) -> str:
    """Undo git's C-style quoting of unusual paths (``"a/t\\303\\251st.py"``)."""
    if len(path) < 2 or not (path.startswith('"') and path.endswith('"')):
        return path
    # unicode_escape turns \303\251 into two latin-1 characters; latin-1 gives back the bytes.
    unescaped = path[1:-1].encode("utf-8").decode("unicode_escape").encode("latin-1")
    return unescaped.decode("utf-8", errors="replace")


def _joined(lines: list[str]) -> str:
    text = "".join(lines)
    return text if not text or text.endswith("\n") else text + "\n"
