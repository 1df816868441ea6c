"""Split a PR's diff into the fix (``patch``), its tests (``test_patch``) and the rest (``aux_patch``).

The diff is in git format, as ``git diff`` and GitHub's ``.diff`` produce it. It is read with
:mod:`repo2env.patches` (as ``git apply`` reads it); each part is the files' own text, rendered
back exactly, so every header git needs (``new file mode``, ``deleted file mode``, renames, mode changes, ``\\ No newline at end of
file``) survives byte for byte and each part applies with ``git apply`` on its own.

Which file goes where is the language's to say: a language profile's
:class:`~repo2env.languages.PathRules` classify each path as test, aux or source (the Python
profile's rules by default; see :mod:`repo2env.languages.python.paths`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from repo2env.languages import DEFAULT_LANGUAGE, PathKind, PathRules, get_profile
from repo2env.patches import FilePatch, parse


def _default_rules() -> PathRules:
    return get_profile(DEFAULT_LANGUAGE).path_rules()


@dataclass(frozen=True, slots=True)
class SplitDiff:
    """A PR's diff cut in three git-format patches, each applicable alone at the base commit.

    ``source_files``/``test_files``/``aux_files`` are the paths each text patch touches (the new
    path of a rename, the old path of a deletion), in the diff's order. Binary files are in no text
    patch and listed only in ``binary_files``; :func:`classify_path` tells their kind.
    ``added_lines``/``removed_lines`` count the fix (``patch``) alone, like ``touches_code``,
    which says whether the fix changes at least one code file of the rules' language (``.py``/``.pyi``
    for Python).
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
    touches_code: bool


def classify_path(path: str, rules: PathRules | None = None) -> PathKind:
    """Whether a repository path is a test, a source or an auxiliary file, by ``rules`` (default:
    the Python profile's)."""
    return (rules or _default_rules()).classify(path)


def test_path_pattern(rules: PathRules | None = None) -> str:
    """A regular expression that a whole path matches (``re.search``) exactly when
    :func:`classify_path` calls it a test file (for code that cannot import this module)."""
    return (rules or _default_rules()).test_pattern()


def split_diff(diff_text: str, rules: PathRules | None = None) -> SplitDiff:
    """Cut a git-format diff into ``patch`` (source), ``test_patch`` and ``aux_patch`` by ``rules``
    (default: the Python profile's).

    Files keep the diff's order inside each part; a non-empty part ends with a newline and an
    empty part is ``""``. Binary files go to ``binary_files`` only. Text before the first file
    (a ``format-patch`` mail header) is dropped. Raises :class:`PatchError` on a malformed diff.
    """
    return split_files(parse(diff_text).files, rules)


def split_files(files: Sequence[FilePatch], rules: PathRules | None = None) -> SplitDiff:
    """:func:`split_diff` of a diff already read (:func:`repo2env.patches.parse`)."""
    rules = rules or _default_rules()
    parts: dict[PathKind, list[str]] = {"source": [], "test": [], "aux": []}
    paths: dict[PathKind, list[str]] = {"source": [], "test": [], "aux": []}
    binary_files: list[str] = []
    added = removed = 0
    touches_code = False
    for file in files:
        if file.is_binary:
            binary_files.append(file.path)
            continue
        kind = rules.classify(file.path)
        parts[kind].append(file.render())
        paths[kind].append(file.path)
        if kind == "source":
            added += file.added
            removed += file.removed
            touches_code = touches_code or any(rules.is_code(path) for path in file.paths)
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
        touches_code=touches_code,
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
